/**
 * The part of a streamed choice's text that can be sent now. Without a trailing U+FFFD: the tokens so far may end
 * inside a character (the decoder writes U+FFFD for the unfinished bytes, a later token completes them). Cut before a
 * stop sequence it contains, as the whole answer is; otherwise without the longest suffix that could still grow into
 * a stop sequence, so no text is ever sent that later turns out to be part of a stop.
 */
export function releasable(text: string, stops: readonly string[]): string {
  let end = text.length;
  while (end > 0 && text.charCodeAt(end - 1) === 0xfffd) end--;
  const t = text.slice(0, end);
  const cut = Math.min(...stops.map((s) => t.indexOf(s)).filter((i) => i >= 0));
  if (Number.isFinite(cut)) return t.slice(0, cut);
  let hold = 0;
  for (const s of stops) {
    for (let k = Math.min(s.length - 1, t.length); k > hold; k--) {
      if (t.endsWith(s.slice(0, k))) {
        hold = k;
        break;
      }
    }
  }
  let keep = t.length - hold;
  // Never split a surrogate pair (a stop that starts with the second half of one).
  const last = t.charCodeAt(keep - 1);
  if (keep > 0 && last >= 0xd800 && last <= 0xdbff) keep--;
  return t.slice(0, keep);
}

/**
 * A choice's generated text as it grows token by token: `push` decodes all its tokens so far (the decoder sees every
 * token in context, as for the whole answer) and returns the new text that can be sent (see `releasable`); `sent` is
 * everything returned so far, always a prefix of the whole answer's text.
 */
export class PendingText {
  private readonly ids: number[] = [];
  private sentText = '';

  constructor(
    private readonly decode: (ids: number[]) => string,
    private readonly stops: readonly string[],
    /** Tokens left out of the text (a chat model's end-of-turn tokens). */
    private readonly hidden: ReadonlySet<number> = new Set(),
  ) {}

  get sent(): string {
    return this.sentText;
  }

  push(ids: readonly number[]): string {
    for (const id of ids) if (!this.hidden.has(id)) this.ids.push(id);
    const safe = releasable(this.ids.length === 0 ? '' : this.decode(this.ids), this.stops);
    // A decoder whose text of fewer tokens is not a prefix of its text of more would make this false: hold until the end.
    if (safe.length <= this.sentText.length || !safe.startsWith(this.sentText)) return '';
    const added = safe.slice(this.sentText.length);
    this.sentText = safe;
    return added;
  }
}
