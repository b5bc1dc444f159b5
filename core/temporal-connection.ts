import { InterceptingCall, Metadata, RequesterBuilder, status, type Interceptor } from '@grpc/grpc-js';
import { Connection, defaultGrpcRetryOptions, makeGrpcRetryInterceptor } from '@temporalio/client';

const CLOSED = 'The Temporal connection is closed';

/**
 * A Temporal client connection that can be closed while calls are still under way.
 *
 * Closing the SDK's connection during an outage leaves a caller's call pending for ever: a try
 * waiting for the channel to connect is never failed, and a try the SDK's retry interceptor has
 * scheduled on a timer (never cancelled) asks the closed channel for a call, which throws from the
 * timer, an uncaught exception that crashes the process. That happens whenever an API or console
 * process shuts down while Temporal is away and a caller still waits on a result
 * (docs/reliability.md). Here closing cancels every try under way, retries no more, and a try
 * already scheduled ends with CANCELLED instead of reaching the channel.
 */
export async function connectTemporal(address: string): Promise<Connection> {
  let closing = false;
  const underWay = new Set<InterceptingCall>();
  const retries = defaultGrpcRetryOptions();
  const retry = makeGrpcRetryInterceptor({
    delayFunction: retries.delayFunction,
    retryableDecider: (attempt, s) => !closing && retries.retryableDecider(attempt, s),
  });
  // Beneath the retry interceptor, so it sees every try, the retried ones included.
  const track: Interceptor = (options, nextCall) => {
    if (closing) return cancelledCall();
    const call: InterceptingCall = new InterceptingCall(
      nextCall(options),
      new RequesterBuilder()
        .withStart((metadata, _listener, next) =>
          next(metadata, {
            onReceiveStatus(s, nextStatus) {
              underWay.delete(call);
              nextStatus(s);
            },
          }),
        )
        .build(),
    );
    underWay.add(call);
    return call;
  };
  const connection = await Connection.connect({ address, interceptors: [retry, track] });
  const close = connection.close.bind(connection);
  connection.close = async () => {
    closing = true;
    for (const call of underWay) call.cancelWithStatus(status.CANCELLED, CLOSED);
    underWay.clear();
    await close();
  };
  return connection;
}

/**
 * A call that never reaches a channel: it ends at once with CANCELLED, as grpc-js's own unary calls
 * end without an answer (an empty message, then the status: the retry interceptor expects both).
 */
function cancelledCall(): InterceptingCall {
  return new InterceptingCall(null as never, {
    start: (_metadata, listener) => {
      queueMicrotask(() => {
        listener.onReceiveMessage?.(null);
        listener.onReceiveStatus?.({ code: status.CANCELLED, details: CLOSED, metadata: new Metadata() });
      });
    },
    sendMessage: () => {},
    halfClose: () => {},
    cancel: () => {},
  });
}
