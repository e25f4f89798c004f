export * from './request-cache.js';
