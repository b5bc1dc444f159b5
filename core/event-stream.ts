import { PassThrough } from 'node:stream';

/**
 * Server-sent events (WHATWG HTML §9.2) for the API and the console alike: one loop that reads,
 * sends what changed, keeps the connection warm with a comment while nothing does, and stops as
 * soon as the client goes (docs/architecture.md "Where each concern lives").
 */

/** The response headers of every event stream: never cached, never buffered by a proxy (nginx's `x-accel-buffering`). */
export const EVENT_STREAM_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-store',
  'x-accel-buffering': 'no',
} as const;

/** What a round of the loop writes through. Nothing is written once the client has gone. */
export interface EventSink {
  /** `event: <name>` with `data` as JSON; false (nothing written) once the client is gone. */
  send(event: string, data: unknown): boolean;
  /**
   * `send`, unless `compareAs` (by default `data`) serialises to what the last `sendIfChanged` sent:
   * a state pushed only when it changes. True when it was written.
   */
  sendIfChanged(event: string, data: unknown, compareAs?: unknown): boolean;
  /** The client has gone (its connection closed). */
  readonly closed: boolean;
}

export interface EventStreamLoop {
  /** The client's side of the connection (fastify's `request.raw`): its `close` stops the loop. */
  client: { once(event: 'close', listener: () => void): unknown };
  /** The pause between rounds. */
  everyMs: number;
  /** A comment line (`: <comment>`) after `afterMs` without any write, so that proxies keep the stream open. */
  heartbeat: { afterMs: number; comment: string };
  /** One round: read, send through the sink; false ends the stream (after its last event, if any). */
  tick(sink: EventSink): Promise<boolean>;
  /** A round that threw: the stream ends (the client sees it close). */
  onError(err: unknown): void;
  /** Once, when the loop has ended however it ended (open-stream slots are released here). */
  onEnd?(): void;
}

export interface EventStream {
  /** The response body: hand it to `reply.headers(EVENT_STREAM_HEADERS).send(body)`. */
  body: PassThrough;
  /** Settles when the loop has ended and the body is ended. */
  done: Promise<void>;
}

/** Starts the loop at once (its first round runs before this returns its first await) and returns the body it writes. */
export function eventStream(loop: EventStreamLoop): EventStream {
  const body = new PassThrough();
  let closed = false;
  let wake: (() => void) | null = null;
  loop.client.once('close', () => {
    closed = true;
    wake?.();
  });
  let lastWrite = Date.now();
  let wroteThisRound = false;
  let lastCompared: string | null = null;
  const write = (text: string): boolean => {
    if (closed || body.destroyed || body.writableEnded) return false;
    body.write(text);
    lastWrite = Date.now();
    wroteThisRound = true;
    return true;
  };
  const sink: EventSink = {
    send: (event, data) => write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`),
    sendIfChanged(event, data, compareAs = data) {
      const key = JSON.stringify(compareAs);
      if (key === lastCompared) return false;
      if (!write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`)) return false;
      lastCompared = key;
      return true;
    },
    get closed() {
      return closed;
    },
  };
  const pause = () =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        wake = null;
        resolve();
      }, loop.everyMs);
      wake = () => {
        clearTimeout(timer);
        wake = null;
        resolve();
      };
    });
  const run = async () => {
    try {
      for (;;) {
        if (closed) break;
        wroteThisRound = false;
        const more = await loop.tick(sink);
        if (!more || closed) break;
        if (!wroteThisRound && Date.now() - lastWrite > loop.heartbeat.afterMs) write(`: ${loop.heartbeat.comment}\n\n`);
        await pause();
      }
    } catch (err) {
      loop.onError(err);
    } finally {
      try {
        loop.onEnd?.();
      } finally {
        body.end();
      }
    }
  };
  return { body, done: run() };
}
