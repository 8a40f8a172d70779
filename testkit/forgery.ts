import { canonicalJson, digestOf, RECORD_TAGS, type StepRunState } from '../domain';
import { buildScenario, type Scenario } from '../domain/scenario';
import type { RecoverableStartBarrierAuthority, StartBarrierAuthority } from '../application/authority';
import { claimRowOf } from '../application/driverClaimRules';
import { eventChainDigest } from '../domain/eventChain';
import { stepRunRowOf } from '../projections/rows';
import type { BackendName, RawSql } from './rawSql';

// R9.1 / R9.2 forgeries, tried with the runtime's own credentials (PostgreSQL: ql3_runtime;
// SQLite: any process that opens the file). Each forgery is one transaction of plain SQL; the
// outcome is `refused` (the database said no), `detected` (it was written, and `verify`
// reports it), or `accepted` (neither: a hole). Used by the forgery specs and by the
// reliability harness's forgery phase.

export type ForgeryOutcome = 'refused' | 'detected' | 'accepted';

export interface Statement {
  readonly sql: string;
  readonly params: readonly unknown[];
}

export interface ForgeryTarget {
  readonly backend: BackendName;
  /** The product over the store under attack: set-up, and `verify` afterwards. */
  readonly authority: RecoverableStartBarrierAuthority;
  /** A second store, where the starts that get copied are made. */
  readonly source: StartBarrierAuthority;
  /** Privileged reads of the two stores (what the attacker could read with the runtime's SELECT). */
  readonly raw: RawSql;
  readonly sourceRaw: RawSql;
  /** One transaction of statements (`?` placeholders, `t()` names) with the runtime's rights; throws when refused. */
  forge(statements: readonly Statement[]): Promise<void>;
}

export interface Judgement {
  readonly outcome: ForgeryOutcome;
  /** The database's refusal, or what `verify` reported. */
  readonly reason: string;
}

export interface Forgery {
  readonly name: string;
  /** When set, the database must refuse it, by the check this names (both backends' wording). */
  readonly refusedBy?: RegExp;
  attempt(target: ForgeryTarget): Promise<Judgement>;
}

type Row = Record<string, unknown>;

const ready = async (a: StartBarrierAuthority, s: Scenario): Promise<void> => {
  for (const c of s.lifecycle) await a.runs.handle(c);
};

/** A StepRun that ran and completed: the target of "started again" and "ready again". */
const completed = async (a: StartBarrierAuthority, s: Scenario): Promise<void> => {
  await ready(a, s);
  await a.barriers.prepare(s.startCommand());
  await a.runs.handle({ type: 'CompleteStepRun', data: { runId: s.runId, stepRunId: s.stepRunId, decidedBy: 'orchestrator', reason: 'tool_succeeded', requestedAtMs: 2 } });
};

const stream = (s: Scenario) => `run-${s.runId}`;

const headOf = async (target: ForgeryTarget, s: Scenario): Promise<number> =>
  Number((await target.raw.all<{ v: unknown }>(`SELECT max(stream_position) AS v FROM ${target.raw.t('events')} WHERE stream_id = ?`, [stream(s)]))[0]?.v ?? 0);

const chainAt = async (target: ForgeryTarget, s: Scenario, position: number): Promise<string> =>
  position === 0 ? '' : String((await target.raw.all<{ c: unknown }>(`SELECT chain_digest AS c FROM ${target.raw.t('events')} WHERE stream_id = ? AND stream_position = ?`, [stream(s), position]))[0]?.c ?? '');

/** The database clock as the runtime stamps rows with it (R3.10), so a forgery is not refused for its time alone. */
const clockSql = (b: BackendName) => (b === 'postgres' ? '(extract(epoch FROM transaction_timestamp()) * 1000)::bigint' : "CAST(unixepoch('subsec') * 1000 AS INTEGER)");

/**
 * Events appended after the target's head, as a forger would: positions that follow, the
 * database clock, and (SQLite, where the writer supplies it) a correct chain link. The time
 * is read first so the link binds it.
 */
const appendEvents = async (target: ForgeryTarget, s: Scenario, events: readonly { event_id: string; event_type: string; data_json: string }[], gap = 0): Promise<Statement[]> => {
  let position = (await headOf(target, s)) + gap;
  let chain = await chainAt(target, s, position);
  const now = Number((await target.raw.all<{ now: unknown }>(`SELECT ${clockSql(target.backend)} AS now`))[0]?.now);
  return events.map((e) => {
    position += 1;
    const row = { stream_id: stream(s), stream_position: position, event_id: e.event_id, event_type: e.event_type, data_json: e.data_json, committed_at_ms: now };
    chain = eventChainDigest(chain, row);
    return target.backend === 'postgres'
      ? { sql: `INSERT INTO ql3.events (stream_id, stream_position, event_id, event_type, data_json, committed_at_ms) VALUES (?, ?, ?, ?, ?, ${clockSql('postgres')})`, params: [row.stream_id, position, e.event_id, e.event_type, e.data_json] }
      : { sql: 'INSERT INTO events (stream_id, stream_position, event_id, event_type, data_json, committed_at_ms, chain_digest) VALUES (?, ?, ?, ?, ?, ?, ?)', params: [row.stream_id, position, e.event_id, e.event_type, e.data_json, now, chain] };
  });
};

export const insertRow = (raw: RawSql, table: string, row: Row): Statement => {
  const cols = Object.keys(row);
  return { sql: `INSERT INTO ${raw.t(table)} (${cols.join(', ')}) VALUES (${cols.map(() => '?').join(', ')})`, params: cols.map((c) => row[c]) };
};

/** Every row of one start made in the source store, read back as they are stored. */
const startRowsIn = async (raw: RawSql, startId: string): Promise<{ events: Row[]; facts: [string, Row[]][] }> => {
  const barrier = (await raw.all<Row>(`SELECT * FROM ${raw.t('tool_execution_start_barriers')} WHERE start_id = ?`, [startId]))[0]!;
  const sequence = Number((await raw.all<{ p: unknown }>(`SELECT stream_position AS p FROM ${raw.t('events')} WHERE event_id = ?`, [barrier.run_event_id]))[0]?.p);
  const events = await raw.all<Row>(
    `SELECT stream_id, stream_position, event_id, event_type, data_json, committed_at_ms, chain_digest FROM ${raw.t('events')} WHERE stream_id = ? AND stream_position BETWEEN ? AND ? ORDER BY stream_position`,
    [`run-${String(barrier.run_id)}`, sequence - 3, sequence + 1],
  );
  const facts: [string, Row[]][] = [];
  for (const table of ['security_audit_events', 'trace_anchors', 'audit_receipts', 'step_run_mutations']) {
    facts.push([table, await raw.all<Row>(`SELECT * FROM ${raw.t(table)} WHERE start_id = ?`, [startId])]);
  }
  facts.push(['tool_execution_start_barriers', [barrier]]);
  // no replay-index rows to copy: each identity is its fact's own key, copied above
  return { events, facts };
};

/** The same Run made ready in the source store, and one start of it made there, read back as stored. */
const sourceStart = async (target: ForgeryTarget, s: Scenario, attempt?: string) => {
  await ready(target.source, s);
  const r = await target.source.barriers.prepare(s.startCommand(undefined, attempt));
  const rows = await startRowsIn(target.sourceRaw, r.barrier.record.startId);
  return { ...rows, events: rows.events as unknown as { event_id: string; event_type: string; data_json: string }[] };
};

/** A self-consistent StepRun head row for a state the log never reached. */
const rewriteHead = (raw: RawSql, state: StepRunState): Statement => {
  const row = stepRunRowOf(state);
  return {
    sql: `UPDATE ${raw.t('step_runs')} SET status = ?, version = ?, digest = ?, state_json = ? WHERE run_id = ? AND step_run_id = ?`,
    params: [row.status, row.version, row.digest, row.state_json, row.run_id, row.step_run_id],
  };
};

const INVENTED_APPROVAL = { approvalRequestId: 'approval-forged', dispatchId: 'dispatch-forged', approvalDigest: digestOf(RECORD_TAGS.command, { forged: true }) };

const currentStepRun = async (target: ForgeryTarget, s: Scenario): Promise<StepRunState> => {
  const got = await target.authority.runs.getStepRun(s.runId, s.stepRunId);
  if (got === null) throw new Error(`StepRun ${s.stepRunId} is missing before the forgery`);
  const { digest: _digest, ...state } = got as StepRunState & { digest?: string };
  return state;
};

/**
 * Runs a forgery and classifies it: refused by the database, or detected by `verify` (a
 * problem naming this scenario's records: every id of a scenario carries its prefix), or
 * accepted.
 */
export const judge = async (target: ForgeryTarget, s: Scenario, statements: readonly Statement[]): Promise<Judgement> => {
  try {
    await target.forge(statements);
  } catch (e) {
    return { outcome: 'refused', reason: e instanceof Error ? e.message : String(e) };
  }
  const prefix = s.runId.slice('run-'.length);
  const report = await target.authority.recovery.verify();
  const mine = report.problems.filter((p) => p.record.includes(prefix) || p.problem.includes(prefix));
  return mine.length === 0 ? { outcome: 'accepted', reason: 'verify reports nothing' } : { outcome: 'detected', reason: mine.map((p) => `${p.kind} ${p.record}: ${p.problem}`).join(' | ') };
};

/** A started start and its id, claimed by `driver-1` for a minute through the product when `claimed`. */
const startedAndClaimed = async (target: ForgeryTarget, s: Scenario, claimed: 'claimed' | 'released' | 'unclaimed'): Promise<string> => {
  await ready(target.authority, s);
  const startId = (await target.authority.barriers.prepare(s.startCommand())).barrier.record.startId;
  if (claimed === 'unclaimed') return startId;
  const claims = target.authority.driverClaims();
  try {
    const c = await claims.claim(startId, 'driver-1', 60_000);
    if (c.status !== 'claimed') throw new Error(`the forgery's own claim of ${startId} was ${c.status}`);
    if (claimed === 'released') await claims.release(c.claim);
  } finally {
    await claims.close();
  }
  return startId;
};

/**
 * One driver claim row as a forger with the runtime's SELECT and INSERT writes it: its time the
 * database clock and its digest over its cells (PostgreSQL computes both in the statement, with
 * the server's own sha256; SQLite's writer supplies them), so only the rule under test refuses it.
 */
const claimInsert = async (target: ForgeryTarget, startId: string, generation: number, kind: 'claim' | 'release', driverId: string, leaseMs: number): Promise<Statement> => {
  if (target.backend === 'postgres') {
    const field = (x: string) => `'\\x00'::bytea || convert_to(${x}, 'UTF8')`;
    return {
      sql: `INSERT INTO ql3.adapter_driver_claims (start_id, generation, kind, driver_id, at_ms, lease_until_ms, claim_digest)
        SELECT v.s, v.g, v.k, v.d, v.t, v.t + v.l, 'sha256:' || encode(sha256(convert_to('qinglong/driver-claim@v1', 'UTF8')
          || ${['v.s', 'v.g::text', 'v.k', 'v.d', 'v.t::text', '(v.t + v.l)::text'].map(field).join(' || ')}), 'hex')
        FROM (SELECT ?::text AS s, ?::bigint AS g, ?::text AS k, ?::text AS d, ${clockSql('postgres')} AS t, ?::bigint AS l) v`,
      params: [startId, generation, kind, driverId, kind === 'release' ? 0 : leaseMs],
    };
  }
  const now = Number((await target.raw.all<{ now: unknown }>(`SELECT ${clockSql(target.backend)} AS now`))[0]?.now);
  return insertRow(target.raw, 'adapter_driver_claims', { ...claimRowOf(startId, generation, kind, driverId, now, kind === 'release' ? now : now + leaseMs) });
};

const lifecycleEvent = (type: string, data: Row) => ({ event_id: `forged-${type}-${String(data.stepRunVersion)}-${Math.random().toString(16).slice(2)}`, event_type: type, data_json: canonicalJson(data) });

export const FORGERIES: readonly Forgery[] = [
  {
    name: 'a completed StepRun rewritten to ready (head UPDATE)',
    attempt: async (target) => {
      const s = buildScenario();
      await completed(target.authority, s);
      const state = await currentStepRun(target, s);
      return judge(target, s, [rewriteHead(target.raw, { ...state, status: 'ready', version: state.version + 1 })]);
    },
  },
  {
    name: 'an invented waiting_approval (head UPDATE)',
    attempt: async (target) => {
      const s = buildScenario();
      await completed(target.authority, s);
      const state = await currentStepRun(target, s);
      return judge(target, s, [rewriteHead(target.raw, { ...state, status: 'waiting_approval', version: state.version + 1, approval: INVENTED_APPROVAL })]);
    },
  },
  {
    name: 'the Run and stream heads rewritten (UPDATE)',
    attempt: async (target) => {
      const s = buildScenario();
      await ready(target.authority, s);
      return judge(target, s, [
        { sql: `UPDATE ${target.raw.t('runs')} SET version = version + 1 WHERE run_id = ?`, params: [s.runId] },
        { sql: `UPDATE ${target.raw.t('streams')} SET version = version + 1 WHERE stream_id = ?`, params: [stream(s)] },
      ]);
    },
  },
  {
    name: 'a completed StepRun made ready again (StepRunReady event)',
    attempt: async (target) => {
      const s = buildScenario();
      await completed(target.authority, s);
      const state = await currentStepRun(target, s);
      return judge(target, s, await appendEvents(target, s, [lifecycleEvent('StepRunReady', { runId: s.runId, stepRunId: s.stepRunId, stepRunVersion: state.version + 1, occurredAtMs: 3 })]));
    },
  },
  {
    name: 'an invented waiting_approval (StepRunAwaitingApproval event on a completed StepRun)',
    attempt: async (target) => {
      const s = buildScenario();
      await completed(target.authority, s);
      const state = await currentStepRun(target, s);
      return judge(
        target,
        s,
        await appendEvents(target, s, [lifecycleEvent('StepRunAwaitingApproval', { runId: s.runId, stepRunId: s.stepRunId, approval: INVENTED_APPROVAL, stepRunVersion: state.version + 1, occurredAtMs: 3 })]),
      );
    },
  },
  {
    name: 'an event inserted with a gap in stream positions',
    attempt: async (target) => {
      const s = buildScenario();
      await ready(target.authority, s);
      const other = buildScenario({ runId: s.runId });
      const created = other.lifecycle.find((c) => c.type === 'CreateStepRun')!.data as Row;
      return judge(
        target,
        s,
        await appendEvents(target, s, [lifecycleEvent('StepRunCreated', { runId: s.runId, stepRunId: created.stepRunId, kind: created.kind, toolDefinition: created.toolDefinition, stepRunVersion: 1, occurredAtMs: 3 })], 1),
      );
    },
  },
  {
    name: 'start facts out of order (a TraceAnchorRecorded with no audit event before it)',
    attempt: async (target) => {
      const s = buildScenario();
      await ready(target.authority, s);
      const { events } = await sourceStart(target, s);
      return judge(target, s, await appendEvents(target, s, [events[1]!]));
    },
  },
  {
    name: "a start's facts under two startIds (another start's trace anchor after this one's audit event)",
    refusedBy: /must follow as|under one startId/,
    attempt: async (target) => {
      const s = buildScenario();
      await ready(target.authority, s);
      const mine = await sourceStart(target, s);
      const other = await sourceStart(target, buildScenario());
      return judge(target, s, await appendEvents(target, s, [mine.events[0]!, other.events[1]!]));
    },
  },
  {
    name: 'a barrier that does not match its StepRunStarted (the four facts before it legal, its runEventSequence moved)',
    refusedBy: /does not match the StepRunStarted/,
    attempt: async (target) => {
      const s = buildScenario();
      await ready(target.authority, s);
      const { events } = await sourceStart(target, s);
      const barrier = JSON.parse(events[4]!.data_json) as { barrier: { runEvent: { runEventSequence: number } } };
      barrier.barrier.runEvent.runEventSequence += 1;
      return judge(target, s, await appendEvents(target, s, [...events.slice(0, 4), { ...events[4]!, data_json: canonicalJson(barrier) }]));
    },
  },
  {
    name: 'a start fact without its StepRun move (the audit event and row alone)',
    attempt: async (target) => {
      const s = buildScenario();
      await ready(target.authority, s);
      const { events, facts } = await sourceStart(target, s);
      const audit = facts[0]![1][0]!;
      const appended = await appendEvents(target, s, [events[0]!]);
      return judge(target, s, [...appended, insertRow(target.raw, 'security_audit_events', { ...audit, committed_at_ms: appended[0]!.params[5] ?? audit.committed_at_ms })]);
    },
  },
  // R9.1: one row more beside a committed start's facts, under an id no event has: an audit
  // record of something that never happened (its FKs point at the start's real rows).
  ...(
    [
      ['security_audit_events', 'audit_event_id'],
      ['trace_anchors', 'trace_id'],
      ['audit_receipts', 'audit_receipt_id'],
      ['step_run_mutations', 'mutation_id'],
    ] as const
  ).map(([table, id]): Forgery => ({
    name: `one more ${table} row for a committed start, under an id no event has`,
    refusedBy: /permission denied|no event of its own/,
    attempt: async (target) => {
      const s = buildScenario();
      await ready(target.authority, s);
      const { startId } = (await target.authority.barriers.prepare(s.startCommand())).barrier.record;
      const [row] = await target.raw.all<Row>(`SELECT * FROM ${target.raw.t(table)} WHERE start_id = ?`, [startId]);
      return judge(target, s, [insertRow(target.raw, table, { ...row!, [id]: `${String(row![id])}-ghost` })]);
    },
  })),
  {
    name: 'a copied start (every row of one start copied from another store, by INSERT alone)',
    attempt: async (target) => {
      const s = buildScenario();
      await ready(target.authority, s);
      const { events, facts } = await sourceStart(target, s);
      const statements = [...events.map((e) => insertRow(target.raw, 'events', e as unknown as Row)), ...facts.flatMap(([table, rows]) => rows.map((row) => insertRow(target.raw, table, row)))];
      return judge(target, s, statements);
    },
  },
  {
    name: 'a completed StepRun started again (a whole start, from the database clock, correctly chained)',
    attempt: async (target) => {
      const s = buildScenario();
      await completed(target.authority, s);
      const { events, facts } = await sourceStart(target, s, 'again');
      const appended = await appendEvents(target, s, events);
      const at = target.backend === 'postgres' ? undefined : appended[0]!.params[5];
      const rows = facts.flatMap(([table, list]) => list.map((row) => insertRow(target.raw, table, 'committed_at_ms' in row && at !== undefined ? { ...row, committed_at_ms: at } : row)));
      return judge(target, s, [...appended, ...rows]);
    },
  },
  {
    name: 'a replay identity naming a started start under a value its barrier does not hold (the value would answer as that start, or be refused to its own command)',
    refusedBy: /permission denied|a value its barrier holds|has no event of its own/,
    attempt: async (target) => {
      const s = buildScenario();
      await ready(target.authority, s);
      const { record } = (await target.authority.barriers.prepare(s.startCommand())).barrier;
      const startId = record.startId;
      // the identity is the fact's own key, so the forgery is a fact row under a new key naming the start
      const forged = insertRow(target.raw, 'trace_anchors', { trace_id: `trace-forged-${startId}`, span_id: record.trace.spanId, start_id: startId, run_id: record.runId, step_run_id: record.stepRunId, trace_digest: record.trace.traceDigest, committed_at_ms: 1 });
      return judge(target, s, [forged]);
    },
  },
  {
    name: 'an outcome row for a running start, inserted without its event (it would take the start off the in-doubt list)',
    refusedBy: /permission denied|projection of its outcome event/,
    attempt: async (target) => {
      const s = buildScenario();
      const startId = await startedAndClaimed(target, s, 'unclaimed');
      const [created] = await target.raw.all<{ event_id: unknown; committed_at_ms: unknown }>(
        `SELECT event_id, committed_at_ms FROM ${target.raw.t('events')} WHERE stream_id = ? AND stream_position = 1`,
        [stream(s)],
      );
      const version = (await currentStepRun(target, s)).version;
      return judge(target, s, [
        insertRow(target.raw, 'start_outcomes', {
          start_id: startId, run_id: s.runId, step_run_id: s.stepRunId, outcome: 'completed', decided_by: 'orchestrator', reason: 'tool_succeeded',
          outcome_digest: null, step_run_version: version + 1, event_id: created?.event_id, stream_position: 1, requested_at_ms: 3, committed_at_ms: created?.committed_at_ms,
        }),
      ]);
    },
  },
  {
    name: "a driver claim taken while another driver's lease lives (generation 2, generation 1 neither released nor run out)",
    refusedBy: /still holds/,
    attempt: async (target) => {
      const s = buildScenario();
      const startId = await startedAndClaimed(target, s, 'claimed');
      return judge(target, s, [await claimInsert(target, startId, 2, 'claim', 'driver-2', 60_000)]);
    },
  },
  {
    name: 'a driver claim that skips a generation (3 after a released 1)',
    refusedBy: /next generation/,
    attempt: async (target) => {
      const s = buildScenario();
      const startId = await startedAndClaimed(target, s, 'released');
      return judge(target, s, [await claimInsert(target, startId, 3, 'claim', 'driver-2', 60_000)]);
    },
  },
  {
    name: 'a release of a live generation by a driver that did not claim it',
    refusedBy: /its own driver claimed/,
    attempt: async (target) => {
      const s = buildScenario();
      const startId = await startedAndClaimed(target, s, 'claimed');
      return judge(target, s, [await claimInsert(target, startId, 1, 'release', 'driver-2', 0)]);
    },
  },
  {
    name: "a driver claim leased past its barrier's timeout plus the grace (R12.3)",
    refusedBy: /at most its barrier's timeout plus 300 s/,
    attempt: async (target) => {
      const s = buildScenario();
      const startId = await startedAndClaimed(target, s, 'unclaimed');
      return judge(target, s, [await claimInsert(target, startId, 1, 'claim', 'driver-2', s.startCommand().admission.timeoutMs + 300_001)]);
    },
  },
  {
    name: 'a 33rd driver claim of one start (R12.3)',
    refusedBy: /claimed at most 32 times/,
    attempt: async (target) => {
      const s = buildScenario();
      const startId = await startedAndClaimed(target, s, 'unclaimed');
      const claims = target.authority.driverClaims();
      try {
        for (let i = 1; i <= 32; i++) {
          const c = await claims.claim(startId, `driver-${i}`, 60_000);
          if (c.status !== 'claimed') throw new Error(`the forgery's own claim ${i} of ${startId} was ${c.status}`);
          await claims.release(c.claim);
        }
      } finally {
        await claims.close();
      }
      return judge(target, s, [await claimInsert(target, startId, 33, 'claim', 'driver-33', 60_000)]);
    },
  },
  {
    name: 'a driver claim leased past the longest lease (26 hours)',
    refusedBy: /at most 25 hours|at most its barrier's timeout plus 300 s/,
    attempt: async (target) => {
      const s = buildScenario();
      const startId = await startedAndClaimed(target, s, 'unclaimed');
      return judge(target, s, [await claimInsert(target, startId, 1, 'claim', 'driver-2', 26 * 3_600_000)]);
    },
  },
];

export interface ForgeryTally {
  readonly attempts: number;
  readonly refused: number;
  readonly detected: number;
  readonly accepted: number;
  readonly outcomes: readonly ({ readonly name: string } & Judgement)[];
}

/** The counts of a list of judged forgeries. */
export const tallyOf = (outcomes: readonly ({ readonly name: string } & Judgement)[]): ForgeryTally => {
  const count = (o: ForgeryOutcome) => outcomes.filter((x) => x.outcome === o).length;
  return { attempts: outcomes.length, refused: count('refused'), detected: count('detected'), accepted: count('accepted'), outcomes };
};

/** Every forgery against one target, in order. */
export const tryForgeries = async (target: ForgeryTarget): Promise<ForgeryTally> => {
  const outcomes: ({ name: string } & Judgement)[] = [];
  for (const f of FORGERIES) outcomes.push({ name: f.name, ...(await f.attempt(target)) });
  return tallyOf(outcomes);
};
