import dgram from 'node:dgram';

/**
 * A small real DNS server on 127.0.0.1 for resolver tests: answers A queries for `records`, NXDOMAIN
 * for every other name (NODATA for AAAA of a known one), or, when `silent`, reads every query and
 * never answers, like a black-holed resolver.
 */
export interface TestDnsServer {
  address: string;
  /** Names queried so far, one entry per query (A and AAAA are two). */
  queries: string[];
  close(): Promise<void>;
}

function questionEnd(msg: Buffer): { name: string; end: number } {
  const labels: string[] = [];
  let i = 12;
  while (msg[i] !== 0) {
    const len = msg[i]!;
    labels.push(msg.subarray(i + 1, i + 1 + len).toString('ascii'));
    i += 1 + len;
  }
  return { name: labels.join('.').toLowerCase(), end: i + 5 }; // root label, QTYPE, QCLASS
}

export async function startDnsServer(opts: { records?: Record<string, string>; silent?: boolean } = {}): Promise<TestDnsServer> {
  const socket = dgram.createSocket('udp4');
  const queries: string[] = [];
  socket.on('message', (msg, rinfo) => {
    const { name, end } = questionEnd(msg);
    queries.push(name);
    if (opts.silent) return;
    const qtype = msg.readUInt16BE(end - 4);
    const ip = opts.records?.[name];
    const header = Buffer.alloc(12);
    msg.copy(header, 0, 0, 2); // the query id
    header.writeUInt16BE(ip === undefined ? 0x8183 : 0x8180, 2); // response, RD+RA; NXDOMAIN or NOERROR
    header.writeUInt16BE(1, 4); // one question
    const answer = ip !== undefined && qtype === 1;
    header.writeUInt16BE(answer ? 1 : 0, 6);
    const parts = [header, msg.subarray(12, end)];
    if (answer) {
      const rr = Buffer.alloc(16);
      rr.writeUInt16BE(0xc00c, 0); // pointer to the question's name
      rr.writeUInt16BE(1, 2); // A
      rr.writeUInt16BE(1, 4); // IN
      rr.writeUInt32BE(60, 6); // TTL
      rr.writeUInt16BE(4, 10);
      ip.split('.').forEach((octet, k) => rr.writeUInt8(Number(octet), 12 + k));
      parts.push(rr);
    }
    socket.send(Buffer.concat(parts), rinfo.port, rinfo.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  return {
    address: `127.0.0.1:${socket.address().port}`,
    queries,
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}
