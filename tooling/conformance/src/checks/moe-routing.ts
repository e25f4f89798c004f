import { ReferenceBackend, type TokenRoutes } from '@flexhelm/engine';

/** golden.json's `derived.routing[layer]` (check.md's Mixtral / Qwen2-MoE sections). */
export interface GoldenRouting {
  positions?: number;
  expert_sets?: number[][];
  tokens_per_expert?: number[];
}

/**
 * A reference backend that records each sparse layer's routes while `recording` is on: what `derived.routing` states
 * for the no-cache forward of `greedy.sequences` (distinct expert sets over the real positions, tokens per expert).
 */
export class RouteRecorder {
  recording = false;
  readonly byLayer = new Map<number, TokenRoutes>();
  readonly backend = new ReferenceBackend({
    onRoutes: (layer: number, routes: TokenRoutes) => {
      if (this.recording) this.byLayer.set(layer, routes);
    },
  });

  /** Where the recorded routes of the real positions (`mask` 1, row-major like the step) differ from the golden's. */
  problems(golden: Record<string, GoldenRouting>, mask: number[][], experts: number): string[] {
    const problems: string[] = [];
    const real = mask.flat().flatMap((m, n) => (m ? [n] : []));
    for (const [layer, want] of Object.entries(golden)) {
      const routes = this.byLayer.get(Number(layer));
      if (!routes) {
        problems.push(`layer ${layer}: no routes recorded (the description has it dense?)`);
        continue;
      }
      const K = routes.topK;
      const sets = new Set<string>();
      const perExpert = new Array<number>(experts).fill(0);
      for (const n of real) {
        const chosen = Array.from(routes.experts.subarray(n * K, (n + 1) * K)).sort((a, b) => a - b);
        sets.add(JSON.stringify(chosen));
        for (const e of chosen) perExpert[e]!++;
      }
      const bySet = (a: number[], b: number[]) => a.join(',').localeCompare(b.join(','));
      const got = [...sets].map((s) => JSON.parse(s) as number[]).sort(bySet);
      // Each statistic the golden states is compared; one it leaves out is not.
      if (typeof want.positions === 'number' && real.length !== want.positions) problems.push(`layer ${layer}: ${real.length} positions, golden ${want.positions}`);
      if (Array.isArray(want.expert_sets)) {
        const expected = [...want.expert_sets].sort(bySet);
        if (JSON.stringify(got) !== JSON.stringify(expected)) problems.push(`layer ${layer}: expert sets ${JSON.stringify(got)}, golden ${JSON.stringify(expected)}`);
      }
      if (Array.isArray(want.tokens_per_expert) && perExpert.join(',') !== want.tokens_per_expert.join(',')) problems.push(`layer ${layer}: tokens per expert ${perExpert}, golden ${want.tokens_per_expert}`);
    }
    return problems;
  }
}
