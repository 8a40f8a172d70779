// The seals of one Run stream over from..to, the events they and from..to span, and the seal
// origins (R9.4, application/eventSeals.ts): one text for the check a keyed read or append
// makes (postgresSeals.ts) and for the head check a keyed start makes inside its first read
// (sql.ts READ_START). `gate` switches all of it off (a one-time filter in the plan).

/** CTEs `span_macs` and `span_range` over `from`..`to` (SQL expressions) of :stream_id. */
export const sealedSpanCtes = (from: string, to: string, gate = 'true') => `span_macs AS (SELECT stream_id, from_position, to_position, key_id, mac FROM ql3.run_event_macs
     WHERE ${gate} AND stream_id = :stream_id AND from_position <= ${to} AND to_position >= ${from}),
  span_range AS (SELECT least(${from}, min(from_position)) AS lo, greatest(${to}, max(to_position)) AS hi FROM span_macs)`;

/**
 * The columns `<prefix>macs`, `<prefix>events` and `<prefix>origins` over those CTEs, each a json
 * list, and `<prefix>evidence_without_origin`: keyed evidence stored while no seal origin is.
 */
export const sealedSpanColumns = (gate = 'true', prefix = '') => `(SELECT coalesce(json_agg(m ORDER BY m.from_position), '[]'::json) FROM span_macs m) AS ${prefix}macs,
  (SELECT coalesce(json_agg(e ORDER BY e.stream_position), '[]'::json)
     FROM (SELECT global_position, stream_id, stream_position, event_id, event_type, data_json, committed_at_ms
             FROM ql3.events, span_range r WHERE ${gate} AND stream_id = :stream_id AND stream_position BETWEEN r.lo AND r.hi) e) AS ${prefix}events,
  (SELECT coalesce(json_agg(o ORDER BY o.key_id), '[]'::json)
     FROM (SELECT key_id, from_global_position, from_ms, legacy_gaps, mac FROM ql3.run_event_seal_origins WHERE ${gate}) o) AS ${prefix}origins,
  (NOT EXISTS (SELECT 1 FROM ql3.run_event_seal_origins WHERE ${gate})
   AND (EXISTS (SELECT 1 FROM ql3.run_event_macs WHERE ${gate}) OR EXISTS (SELECT 1 FROM ql3.start_evidence_macs WHERE ${gate}))) AS ${prefix}evidence_without_origin`;
