import { connect } from 'node:net';

/** Sends bytes exactly as given and returns whatever comes back until the server closes or goes quiet. */
export function rawRequest(port: number, data: string | Buffer, quietMs = 300): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let timer: NodeJS.Timeout | undefined;
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(Buffer.concat(chunks).toString('latin1'));
    };
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(done, quietMs);
    };
    socket.on('data', (c: Buffer) => {
      chunks.push(c);
      arm();
    });
    socket.on('end', done);
    socket.on('close', done);
    socket.on('error', (err) => (chunks.length > 0 ? done() : reject(err)));
    socket.write(data);
    arm();
  });
}

export function statusOf(response: string): number {
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(response);
  return m ? Number(m[1]) : 0;
}
