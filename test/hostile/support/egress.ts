import diagnostics from 'node:diagnostics_channel';
import type net from 'node:net';

/**
 * Records every outgoing TCP connection attempt of this process (node:diagnostics_channel
 * `net.client.socket`, then the socket's `connectionAttempt` event), whatever its address or
 * port. The loopback canary only sees connections to its own port; this sees a leak anywhere,
 * e.g. to 10.0.0.1:80 or to the metadata address, which the canary would miss.
 */

export interface Attempt {
  address: string;
  port: number;
}

export interface EgressMonitor {
  attempts: Attempt[];
  /** Attempts to anything but the allowed `address:port` pairs. */
  unexpected(allowed: ReadonlyArray<Attempt>): Attempt[];
  stop(): void;
}

export function monitorEgress(): EgressMonitor {
  const attempts: Attempt[] = [];
  const onSocket = (message: unknown) => {
    const socket = (message as { socket: net.Socket }).socket;
    socket.on('connectionAttempt', (address: string, port: number) => attempts.push({ address, port }));
  };
  diagnostics.subscribe('net.client.socket', onSocket);
  return {
    attempts,
    unexpected: (allowed) => attempts.filter((a) => !allowed.some((ok) => normalise(ok.address) === normalise(a.address) && ok.port === a.port)),
    stop: () => diagnostics.unsubscribe('net.client.socket', onSocket),
  };
}

const normalise = (address: string) => (address === 'localhost' ? '127.0.0.1' : address.replace(/^::ffff:/, ''));

/** host:port of a service URL (postgres://, redis://), for the allowed list. */
export function endpointOf(url: string, defaultPort: number): Attempt {
  const u = new URL(url);
  return { address: u.hostname.replace(/^\[|\]$/g, ''), port: u.port === '' ? defaultPort : Number(u.port) };
}
