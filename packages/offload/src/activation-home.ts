import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { readFile, writeFile } from '@flexhelm/pinned-memory';
import type { IoClock } from './io-clock.js';
import type { Policy } from './policy.js';

/**
 * FlexLLMGen's store_hidden / load_hidden: with the activations' home on disk, each layer's output goes to a file and
 * comes back before the next layer (float32 both ways, so nothing changes but the I/O). Host and compute activations
 * are the same RAM here.
 */
export class ActivationHome {
  constructor(
    private readonly policy: Policy,
    private readonly diskDir: string | undefined,
    private readonly direct: boolean,
    private readonly clock: IoClock,
    private readonly stats: { activationDiskBytes: number },
  ) {}

  get onDisk(): boolean {
    return this.policy.actGpuPercent + this.policy.actCpuPercent === 0;
  }

  async place(hidden: Float32Array): Promise<Float32Array> {
    if (!this.onDisk) return hidden;
    const file = join(this.diskDir!, 'activations.bin');
    return this.clock.track(async () => {
      mkdirSync(this.diskDir!, { recursive: true });
      await writeFile(file, hidden, { offset: 0, direct: this.direct });
      const back = new Float32Array(hidden.length);
      await readFile(file, back, { direct: this.direct });
      this.stats.activationDiskBytes += 2 * hidden.byteLength;
      return back;
    });
  }
}
