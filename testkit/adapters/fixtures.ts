import { join } from 'node:path';
import type { ToolAdapter } from '../../domain';
import { httpAdapter, mcpAdapter, processAdapter } from '../../infrastructure/adapters';
import { ADAPTER_REFS } from './toolCall';
import { MCP_ACT_TOOL, MCP_STATUS_TOOL, mcpStdioCommand, processToolCommand, type ToolMode } from './tools';

// How each real adapter is configured against the local tools, as plain JSON so a saga child
// process can build the very same adapter.

/** `http-plain`: a tool with neither a status endpoint nor Idempotency-Key support (at-most-once). */
export const ADAPTER_NAMES = ['process', 'http', 'mcp-http', 'mcp-stdio', 'http-plain'] as const;
export type AdapterName = (typeof ADAPTER_NAMES)[number];

export interface AdapterConfig {
  readonly name: AdapterName;
  /** Process: the journal directory; every adapter: where the tool counts its effects. */
  readonly dir: string;
  readonly effectsPath: string;
  /** The mode of a tool this adapter starts itself (process, MCP stdio). */
  readonly mode: ToolMode;
  readonly url?: string;
  readonly statusUrl?: string;
}

export const executionClassOf = (name: AdapterName): keyof typeof ADAPTER_REFS => (name === 'process' ? 'process' : name.startsWith('http') ? 'http' : 'mcp');

export const adapterFor = (c: AdapterConfig): ToolAdapter => {
  switch (c.name) {
    case 'process':
      return processAdapter({ ref: ADAPTER_REFS.process, ...processToolCommand, journalDir: join(c.dir, 'journal'), env: { TOOL_EFFECTS: c.effectsPath, TOOL_MODE: c.mode } });
    case 'http':
      return httpAdapter({ ref: ADAPTER_REFS.http, url: c.url!, statusUrl: c.statusUrl! });
    case 'http-plain':
      return httpAdapter({ ref: ADAPTER_REFS.http, url: c.url!, honoursIdempotencyKey: false });
    case 'mcp-http':
      return mcpAdapter({ ref: ADAPTER_REFS.mcp, transport: { kind: 'http', url: c.url! }, tool: MCP_ACT_TOOL, statusTool: MCP_STATUS_TOOL, dedupesOnStartId: true });
    case 'mcp-stdio':
      return mcpAdapter({ ref: ADAPTER_REFS.mcp, transport: mcpStdioCommand(c.effectsPath, c.mode), tool: MCP_ACT_TOOL, statusTool: MCP_STATUS_TOOL, dedupesOnStartId: true });
    default: {
      const _exhaustive: never = c.name;
      throw new Error(`unknown adapter ${String(_exhaustive)}`);
    }
  }
};
