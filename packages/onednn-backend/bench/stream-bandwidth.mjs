// The machine's stream read rate, the decode benchmarks' floor: 1 GiB (far past the last-level cache) read once on
// every core by the addon's streamRead, median of three reads.
import { median } from './measure-backend.mjs';

/** A function measuring GB/s now (the buffer is allocated and touched once, here). */
export function streamBandwidth(native) {
  const buffer = native.allocFloat32(256 * 2 ** 20).fill(0.01);
  return async () => {
    const times = [];
    for (let r = 0; r < 3; r++) {
      const t0 = performance.now();
      await native.streamRead(buffer);
      times.push((performance.now() - t0) / 1000);
    }
    return buffer.byteLength / median(times) / 1e9;
  };
}
