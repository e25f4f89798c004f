import { isIP } from 'node:net';

/** Whether binding `host` keeps the server reachable from this machine only. */
export function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  if (isIP(host) === 6) return host === '::1' || host.toLowerCase() === '::ffff:127.0.0.1';
  return false;
}
