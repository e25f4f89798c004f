import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from './api-error.js';
import { endpoint } from './endpoint.js';
import { parseJsonText, sseEvent } from './http-io.js';
import { isFinished, type JobRecord } from './job-record.js';
import type { JobManager } from './job-manager.js';
import { pathOf } from './request-path.js';
import type { RequestState } from './request-state.js';
import { runPredictions } from './run-predictions.js';

export interface JobRoutesContext {
  jobs: JobManager;
  /** Job event streams are tracked in it, to be ended at shutdown. */
  state: RequestState;
  /** HELM output folder the runs' predictions are read from. */
  outputPath: string;
}

/** Evaluation jobs under `/v1/runs`: submit, list, show, cancel, follow (server-sent events), predictions. */
export function registerJobRoutes(app: FastifyInstance, ctx: JobRoutesContext): void {
  const { jobs, state } = ctx;
  endpoint(app, '/v1/runs', {
    GET: () => ({ object: 'list', data: jobs.list() }),
    POST: async (req, reply) => reply.code(201).send(await jobs.submit(parseJsonText(req.body as string | undefined))),
  });

  const jobId = (req: FastifyRequest) => {
    const { id } = req.params as { id: string };
    if (!/^[\w-]+$/.test(id)) throw new ApiError(404, `no endpoint ${req.method} ${pathOf(req)}`, 'invalid_request_error', null, 'not_found');
    return id;
  };
  endpoint(app, '/v1/runs/:id', { GET: (req) => jobs.get(jobId(req)), DELETE: (req) => jobs.cancel(jobId(req)) });
  endpoint(app, '/v1/runs/:id/events', { GET: (req, reply) => streamEvents(reply, jobId(req)) });
  endpoint(app, '/v1/runs/:id/predictions', {
    GET: (req) => {
      const id = jobId(req);
      const job = jobs.get(id);
      const which = (req.query as { run?: string }).run ?? '0';
      const run = /^\d+$/.test(which) ? job.runs[Number(which)] : job.runs.find((r) => r.name === which);
      if (!run) throw new ApiError(404, `job ${id} has no run ${which}; give ?run=<index or name> of one of its ${job.runs.length} runs`, 'invalid_request_error', 'run');
      if (!run.runDir) throw new ApiError(409, `run ${run.name} is ${run.status}: predictions exist once it is done`, 'invalid_request_error', 'run');
      return { object: 'list', run: run.name, data: runPredictions(ctx.outputPath, run.runDir) };
    },
  });

  /** A job's progress as server-sent events until it finishes, with a keep-alive comment every 15 s. */
  function streamEvents(reply: FastifyReply, id: string): void {
    const job = jobs.get(id);
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' });
    state.eventStreams.add(res);
    state.jobStreams.add(res);
    const send = (event: string, j: JobRecord) => res.write(sseEvent(j, event));
    const finish = () => {
      unsubscribe();
      clearInterval(heartbeat);
      state.jobStreams.delete(res);
      res.end();
    };
    const unsubscribe = jobs.subscribe(id, (j) => {
      send('progress', j);
      if (isFinished(j.status)) {
        send('end', j);
        finish();
      }
    });
    const heartbeat = setInterval(() => res.write(': keep-alive\n\n'), 15_000);
    res.on('close', finish);
    send('progress', job);
    if (isFinished(job.status)) {
      send('end', job);
      finish();
    }
  }
}
