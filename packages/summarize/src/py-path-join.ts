/**
 * Python's `os.path.join` on POSIX: no normalisation, so paths HELM writes into its JSON (`run_path`, the LaTeX and
 * JSON links) keep the `--output-path` exactly as the user typed it.
 */
export function pyPathJoin(first: string, ...rest: string[]): string {
  let path = first;
  for (const part of rest) {
    if (part.startsWith('/')) path = part;
    else if (path === '' || path.endsWith('/')) path += part;
    else path += `/${part}`;
  }
  return path;
}
