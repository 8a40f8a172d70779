import { writeFileSync } from 'node:fs';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { EffectsFile, mcpToolServer, type ToolMode } from './tools';

// The MCP tool as a stdio server process (spawned by the MCP adapter, one per call). Losing an
// answer after acting, or resetting before acting, is this process exiting at once.
// Environment: TOOL_EFFECTS (effects file), TOOL_MODE (see ToolMode), and PROBE_OUT: when
// set, the server first writes the whole environment it got there (the environment probe).

if (process.env.PROBE_OUT !== undefined) writeFileSync(process.env.PROBE_OUT, JSON.stringify(process.env));
const effects = new EffectsFile(process.env.TOOL_EFFECTS ?? '');
const mode = (process.env.TOOL_MODE ?? 'ok') as ToolMode;
const server = mcpToolServer(effects, () => mode, () => process.exit(0), () => process.exit(0));
void server.connect(new StdioServerTransport());
