import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

// How a tool's whole process tree is held to its timeout (R12.3). A process group is not
// enough: a tool that calls `setsid` (or daemonizes) leaves the group and keeps acting after
// the group is killed. A PID namespace is: its first process is the adapter's wrapper, and
// when that process ends (it exits, or `unshare --kill-child` kills it because unshare was
// killed) the kernel kills every process left in the namespace, whatever session or group it
// made for itself. Linux only, through util-linux `unshare`; where no namespace can be made
// the adapter contains the tool by its process group alone and does not declare that it
// enforces the timeout.

export type Containment = 'pid-namespace' | 'none';

/** How `unshare` is run for a tool, when this host can make a PID namespace. */
export interface Unshare {
  readonly path: string;
  readonly flags: readonly string[];
}

const UNSHARE_PATHS = ['/usr/bin/unshare', '/bin/unshare'];
/** As root (or CAP_SYS_ADMIN), then as an unprivileged user through a user namespace. */
const FLAG_SETS: readonly (readonly string[])[] = [
  ['--pid', '--fork', '--kill-child'],
  ['--user', '--map-current-user', '--pid', '--fork', '--kill-child'],
];

let probed: Unshare | null | undefined;

/** The first way this host makes a PID namespace, tried once per process (a few ms). */
export const unshareOnThisHost = (): Unshare | null => {
  if (probed !== undefined) return probed;
  probed = null;
  if (process.platform !== 'linux') return probed;
  const path = UNSHARE_PATHS.find((p) => existsSync(p));
  if (path === undefined) return probed;
  for (const flags of FLAG_SETS) {
    const r = spawnSync(path, [...flags, '/bin/sh', '-c', 'exit 0'], { env: {}, stdio: 'ignore', timeout: 10_000 });
    if (r.status === 0) return (probed = { path, flags });
  }
  return probed;
};
