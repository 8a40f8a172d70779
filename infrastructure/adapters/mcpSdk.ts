import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import { DriverMissingError } from '../../application/openErrors';

// The MCP SDK is an optional peer: loaded on first use by the MCP adapter alone, so an install
// without it (the edge, a process- or HTTP-only runtime) never loads its 30-odd packages, and
// the CLI starts without them. Type imports above vanish from the emitted code.

export interface McpSdk {
  readonly Client: typeof Client;
  readonly StreamableHTTPClientTransport: typeof StreamableHTTPClientTransport;
  readonly ReadBuffer: typeof ReadBuffer;
  readonly serializeMessage: typeof serializeMessage;
}

const PACKAGE = '@modelcontextprotocol/sdk';
let loaded: McpSdk | undefined;

/** The SDK is reached by subpath, so the resolver names `'@modelcontextprotocol/sdk/…'`. */
const missing = (e: unknown): boolean =>
  typeof e === 'object' && e !== null && (e as { code?: unknown }).code === 'MODULE_NOT_FOUND' && String((e as { message?: unknown }).message).includes(`'${PACKAGE}/`);

/** The SDK, or DRIVER_MISSING naming the package to install. */
export const mcpSdk = (): McpSdk => {
  if (loaded !== undefined) return loaded;
  try {
    /* eslint-disable @typescript-eslint/no-require-imports */
    const client = require('@modelcontextprotocol/sdk/client/index.js') as { Client: typeof Client };
    const http = require('@modelcontextprotocol/sdk/client/streamableHttp.js') as { StreamableHTTPClientTransport: typeof StreamableHTTPClientTransport };
    const stdio = require('@modelcontextprotocol/sdk/shared/stdio.js') as { ReadBuffer: typeof ReadBuffer; serializeMessage: typeof serializeMessage };
    loaded = { Client: client.Client, StreamableHTTPClientTransport: http.StreamableHTTPClientTransport, ReadBuffer: stdio.ReadBuffer, serializeMessage: stdio.serializeMessage };
    return loaded;
  } catch (e) {
    if (missing(e)) throw new DriverMissingError(PACKAGE, '/adapters', { cause: e });
    throw e;
  }
};
