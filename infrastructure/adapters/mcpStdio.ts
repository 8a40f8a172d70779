import { spawn, type ChildProcess } from 'node:child_process';
import { mcpSdk } from './mcpSdk';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

// An MCP stdio client transport whose server gets only the environment it is given (R12.3).
// The SDK's own StdioClientTransport always adds the runtime's HOME, LOGNAME, PATH, SHELL,
// TERM and USER to what it is given; a tool server gets nothing of the runtime's here. The
// server runs in its own process group, and closing the transport ends that group.

export interface AllowlistStdioOptions {
  readonly command: string;
  readonly args: readonly string[];
  /** The server's whole environment. */
  readonly env: Readonly<Record<string, string>>;
  readonly cwd?: string;
}

export class AllowlistStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  private child: ChildProcess | undefined;
  private readonly buffer = new (mcpSdk().ReadBuffer)();

  constructor(private readonly options: AllowlistStdioOptions) {}

  start(): Promise<void> {
    if (this.child !== undefined) throw new Error('the stdio transport is started already');
    return new Promise((resolve, reject) => {
      const child = spawn(this.options.command, [...this.options.args], {
        env: { ...this.options.env },
        stdio: ['pipe', 'pipe', 'ignore'],
        detached: true,
        ...(this.options.cwd === undefined ? {} : { cwd: this.options.cwd }),
      });
      this.child = child;
      child.on('error', (e) => {
        reject(e);
        this.onerror?.(e);
      });
      child.on('spawn', () => resolve());
      child.on('close', () => {
        this.child = undefined;
        this.onclose?.();
      });
      child.stdin!.on('error', (e) => this.onerror?.(e));
      child.stdout!.on('error', (e) => this.onerror?.(e));
      child.stdout!.on('data', (chunk: Buffer) => {
        this.buffer.append(chunk);
        for (;;) {
          let message: JSONRPCMessage | null;
          try {
            message = this.buffer.readMessage();
          } catch (e) {
            this.onerror?.(e as Error);
            continue;
          }
          if (message === null) break;
          this.onmessage?.(message);
        }
      });
    });
  }

  send(message: JSONRPCMessage): Promise<void> {
    return new Promise((resolve, reject) => {
      const stdin = this.child?.stdin;
      if (stdin === undefined || stdin === null) return reject(new Error('not connected'));
      if (stdin.write(mcpSdk().serializeMessage(message))) resolve();
      else stdin.once('drain', () => resolve());
    });
  }

  async close(): Promise<void> {
    const child = this.child;
    this.child = undefined;
    this.buffer.clear();
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
    child.stdin?.end();
    const waited = await Promise.race([closed.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 1000).unref())]);
    if (waited) return;
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
    await Promise.race([closed, new Promise<void>((r) => setTimeout(r, 1000).unref())]);
  }
}
