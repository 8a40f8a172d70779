import { Socket, createServer, type Server } from 'node:net';

/**
 * A TCP relay in front of a real PostgreSQL server that can stop relaying: the sockets stay
 * open and every byte is dropped, which is what a client sees of a frozen (SIGSTOPped) or
 * partitioned server. Specs point an authority at `port` and call `freeze()` / `thaw()`.
 */
export interface FreezableProxy {
  readonly port: number;
  freeze(): void;
  thaw(): void;
  close(): Promise<void>;
}

export const startFreezableProxy = async (targetHost: string, targetPort: number): Promise<FreezableProxy> => {
  let frozen = false;
  const sockets = new Set<Socket>();
  const relay = (from: Socket, to: Socket) =>
    from.on('data', (chunk) => {
      if (!frozen) to.write(chunk);
    });
  const server: Server = createServer((client) => {
    const upstream = new Socket();
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => sockets.delete(s));
    }
    upstream.connect(targetPort, targetHost);
    relay(client, upstream);
    relay(upstream, client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('proxy has no TCP port');
  return {
    port: address.port,
    freeze: () => void (frozen = true),
    thaw: () => void (frozen = false),
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
};

/** A TCP port on 127.0.0.1 that nothing listens on (taken, then released). */
export const closedPort = async (): Promise<number> => {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no TCP port');
  return address.port;
};
