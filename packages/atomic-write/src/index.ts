export { AtomicWriteError, asWriteError } from './atomic-write-error.js';
export { commitTree } from './commit-tree.js';
export { makeFolder } from './make-folder.js';
export {
  commitTempFile,
  isTempName,
  renameIntoPlace,
  syncFolder,
  tempPathFor,
  writeAll,
  writeFileAtomic,
  writeFileAtomicWith,
  writeFilesAtomic,
  writeTempFile,
  type FileData,
} from './write-file-atomic.js';
export { commitTempFileAsync, writeFileAtomicAsync, writeFilesAtomicAsync } from './write-file-atomic-async.js';
