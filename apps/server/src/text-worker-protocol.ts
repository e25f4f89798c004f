/** A message as chat templates see it. */
export interface TemplateMessage {
  role: string;
  content: string;
  name?: string;
}

export interface TextWorkerData {
  /** The model folder whose tokenizer the worker loads (absent: the worker only renders). */
  tokenizerFolder?: string;
  tokenizerName: string;
  template?: { source: string; bosToken?: string; eosToken?: string };
  /** Longest rendered prompt accepted (characters). */
  maxRenderChars: number;
  /** Lower this thread's priority below the event loop's (`TextWorkersOptions.background`). */
  background: boolean;
}

export type TextJob =
  | { id: number; kind: 'encode'; texts: string[] }
  /** Render, then (with `encode`) tokenize the rendered prompt unless it is over `maxChars` characters. */
  | { id: number; kind: 'render'; messages: TemplateMessage[]; encode: boolean; maxChars?: number }
  /** Token ids back to text (`/detokenize`), or with `pieces` to one string per id (`/tokenize`'s `token_strs`). */
  | { id: number; kind: 'decode'; ids: number[]; pieces: boolean };

export type TextReply =
  /** The render started (its time limit starts here: neither the queue nor the worker's start-up counts). */
  | { id: number; started: true }
  /** The render finished (its time limit stops here; tokenizing follows). */
  | { id: number; rendered: true }
  | { id: number; text?: string; ids: number[][] }
  | { id: number; error: string; stage: 'render' | 'encode' }
  | { id: number; tooLong: number }
  | { id: number; decoded: string | string[] };
