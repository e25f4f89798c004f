export * from './archive-builders.js';
export * from './loopback-file-server.js';
