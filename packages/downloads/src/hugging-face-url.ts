/**
 * The download URL of one file of a Hugging Face Hub repository (`{endpoint}/{repo}/resolve/{revision}/{path}`), with
 * the endpoint taken from `$HF_ENDPOINT` when set, as the Hub's own clients do.
 */
export function huggingFaceFileUrl(repo: string, path: string, options: { revision?: string; repoType?: 'model' | 'dataset' | 'space'; env?: NodeJS.ProcessEnv } = {}): string {
  if (!/^[\w.-]+(\/[\w.-]+)?$/.test(repo)) {
    throw new Error(`"${repo}" is not a Hugging Face repository id; write it as "owner/name" (e.g. "facebook/opt-125m").`);
  }
  if (!path || path.startsWith('/') || path.split('/').includes('..')) {
    throw new Error(`"${path}" is not a file path inside a repository; give a relative path such as "config.json".`);
  }
  const endpoint = (options.env ?? process.env).HF_ENDPOINT?.replace(/\/+$/, '') || 'https://huggingface.co';
  const prefix = options.repoType === 'dataset' ? 'datasets/' : options.repoType === 'space' ? 'spaces/' : '';
  const revision = encodeURIComponent(options.revision ?? 'main');
  const encodedPath = path.split('/').map(encodeURIComponent).join('/');
  return `${endpoint}/${prefix}${repo}/resolve/${revision}/${encodedPath}`;
}
