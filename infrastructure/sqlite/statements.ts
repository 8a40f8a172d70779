import type Database from 'better-sqlite3';
import * as SQL from './sql';

/** Every statement the SQLite authority runs, by name. */
const STATEMENTS = {
  now: SQL.NOW_MS,
  lookup: SQL.LOOKUP_REPLAY,
  runCompacted: SQL.SELECT_RUN_COMPACTED,
  identitiesOfStart: SQL.IDENTITIES_OF_START,
  commandDigest: SQL.SELECT_COMMAND_DIGEST,
  runHead: SQL.SELECT_RUN_HEAD,
  startHead: SQL.SELECT_START_HEAD,
  streamVersion: SQL.SELECT_STREAM_VERSION,
  streamHeads: SQL.SELECT_STREAM_HEADS,
  stepRun: SQL.SELECT_STEP_RUN,
  insertStream: SQL.INSERT_STREAM,
  casStream: SQL.CAS_STREAM,
  insertEvent: SQL.INSERT_EVENT,
  appendEvent: SQL.APPEND_EVENT,
  chainDigest: SQL.SELECT_CHAIN_DIGEST,
  streamEvents: SQL.SELECT_STREAM_EVENTS,
  insertRun: SQL.INSERT_RUN,
  casRun: SQL.CAS_RUN,
  upsertStepRun: SQL.UPSERT_STEP_RUN,
  casStepRun: SQL.CAS_STEP_RUN,
  insertAudit: SQL.INSERT_AUDIT,
  insertTrace: SQL.INSERT_TRACE,
  insertReceipt: SQL.INSERT_RECEIPT,
  insertMutation: SQL.INSERT_MUTATION,
  insertBarrier: SQL.INSERT_BARRIER,
  barrierWithFacts: SQL.SELECT_BARRIER_WITH_FACTS,
  startEvents: SQL.SELECT_START_EVENTS,
  attempt: SQL.SELECT_ATTEMPT,
  indexNamesStart: SQL.SELECT_INDEX_NAMES_START,
  eventsOfType: SQL.SELECT_STREAM_EVENTS_OF_TYPE,
  lastStepRunEvent: SQL.SELECT_LAST_STEP_RUN_EVENT,
  stepRunLog: SQL.SELECT_STEP_RUN_LOG,
  insertEvidenceMac: SQL.INSERT_EVIDENCE_MAC,
  evidenceMacs: SQL.SELECT_EVIDENCE_MACS,
  insertEventMac: SQL.INSERT_EVENT_MAC,
  eventMacsOver: SQL.SELECT_EVENT_MACS_OVER,
  sealOrigins: SQL.SELECT_SEAL_ORIGINS,
  keyedEvidenceStored: SQL.KEYED_EVIDENCE_STORED,
  insertSealOrigin: SQL.INSERT_SEAL_ORIGIN,
  nextGlobalPosition: SQL.NEXT_GLOBAL_POSITION,
  sealOriginPosition: SQL.SEAL_ORIGIN_POSITION,
  freePositionsBelow: SQL.FREE_POSITIONS_BELOW,
};

export type Statements = { readonly [K in keyof typeof STATEMENTS]: Database.Statement };

/**
 * Statements whose rows come back as arrays of cells: their columns repeat names across tables,
 * or every replay reads them and an object per row built by the driver costs more than one
 * built by the reader (reads.ts names the cells).
 */
const RAW: ReadonlySet<keyof typeof STATEMENTS> = new Set(['barrierWithFacts', 'lookup', 'identitiesOfStart', 'startEvents']);
/** Statements that answer one value. */
const PLUCK: ReadonlySet<keyof typeof STATEMENTS> = new Set(['commandDigest']);

/** Prepared once on the authority's one connection. */
export const prepareStatements = (db: Database.Database): Statements =>
  Object.fromEntries(
    Object.entries(STATEMENTS).map(([name, sql]) => {
      const statement = db.prepare(sql);
      const key = name as keyof typeof STATEMENTS;
      return [name, RAW.has(key) ? statement.raw(true) : PLUCK.has(key) ? statement.pluck(true) : statement];
    }),
  ) as unknown as Statements;

/** SQLite's own clock (R3.10), read once per transaction. */
export const nowMsOf = (s: Statements): number => (s.now.get() as { now_ms: number }).now_ms;
