import { createServer, connect, type Server, type Socket } from 'node:net';

/**
 * A TCP relay to 127.0.0.1:`targetPort` that can hold back what the target sends on replication
 * links, as a slow link would: a replica connected through it lags its master for as long as the
 * relay holds. Only connections that spoke REPLCONF/PSYNC (a replica's) are held; the others
 * (sentinel, clients) pass freely, so the master does not look down.
 */
export interface TcpRelay {
  readonly port: number;
  /** Stop passing the target's bytes on (they are kept, in order). */
  hold(): void;
  /** Pass on what was kept and everything after. */
  release(): void;
  /** Bytes held back right now. */
  held(): number;
  close(): Promise<void>;
}

export async function startTcpRelay(targetPort: number): Promise<TcpRelay> {
  let holding = false;
  const pairs = new Set<{ client: Socket; target: Socket; kept: Buffer[] }>();
  const server: Server = createServer((client) => {
    const target = connect(targetPort, '127.0.0.1');
    const pair = { client, target, kept: [] as Buffer[], replication: false };
    pairs.add(pair);
    client.on('data', (b: Buffer) => {
      if (!pair.replication && /REPLCONF|PSYNC/i.test(b.toString('latin1'))) pair.replication = true;
      target.write(b);
    });
    target.on('data', (b: Buffer) => (holding && pair.replication ? pair.kept.push(b) : client.write(b)));
    // The target gone: what it sent and the relay still held is lost with it, as on a real link.
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      target.destroy();
    };
    for (const s of [client, target]) {
      s.on('error', end);
      s.on('close', end);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    port,
    hold: () => {
      holding = true;
    },
    release: () => {
      holding = false;
      for (const p of pairs) for (const b of p.kept.splice(0)) p.client.write(b);
    },
    held: () => [...pairs].reduce((n, p) => n + p.kept.reduce((m, b) => m + b.length, 0), 0),
    close: async () => {
      for (const p of pairs) {
        p.client.destroy();
        p.target.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
