import { expect } from 'chai';
import type { ToolStepTrigger as RootTrigger } from '../../domain';
import type * as Sqlite from '../../infrastructure/sqlite';
import type * as Postgres from '../../infrastructure/postgres';
import type * as Testing from '../../infrastructure/memory/testing';
import * as Saga from '../../application/saga';
import { openMemoryStartBarrier } from '../../infrastructure/memory/testing';
import { TEST_PLANS } from '../../testkit/planKeys';

// R6.1 typed all the way: each subpath a user opens an authority from also names its types (the
// recoverable authority and its recovery surface), and the saga's drive takes the trigger type,
// not `unknown`. Checked by the compiler (`tsc --noEmit` over the specs); the cases below fail
// to compile if an export goes missing or a type widens.

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
const same = <A, B>(proof: Equal<A, B>): boolean => proof;

describe('R6.1 exported types (every subpath names the authority types it makes)', () => {
  it('R6.1 /sqlite, /postgres and /testing name one and the same recoverable authority and recovery surface', () => {
    expect(same<Sqlite.RecoverableStartBarrierAuthority, Postgres.RecoverableStartBarrierAuthority>(true)).to.equal(true);
    expect(same<Postgres.RecoverableStartBarrierAuthority, Testing.RecoverableStartBarrierAuthority>(true)).to.equal(true);
    expect(same<Postgres.InDoubtStart, Testing.InDoubtStart>(true)).to.equal(true);
    expect(same<Postgres.VerifyReport, Sqlite.VerifyReport>(true)).to.equal(true);
    expect(same<Postgres.RecoveryApi, Testing.RecoveryApi>(true)).to.equal(true);
    expect(same<Awaited<ReturnType<typeof Postgres.openPostgresStartBarrier>>['recovery'], Postgres.RecoveryApi>(true)).to.equal(true);
  });

  it("R6.1 the saga's drive takes the trigger type (from /saga and the root alike), not unknown", async () => {
    expect(same<Parameters<Saga.ToolStepSaga['drive']>[0], Saga.ToolStepTrigger>(true)).to.equal(true);
    expect(same<Saga.ToolStepTrigger, RootTrigger>(true)).to.equal(true);
    expect(same<Parameters<Saga.ToolStepSaga['drive']>[0], unknown>(false)).to.equal(false);
    const authority: Saga.RecoverableStartBarrierAuthority = await openMemoryStartBarrier({ plans: TEST_PLANS });
    const execution = Saga.openExecution(authority, { execution: 'enabled' });
    const saga = Saga.createToolStepSaga({ execution, adapter: { declaration: { kind: 'process', ref: { id: 'a', digest: `sha256:${'0'.repeat(64)}` }, guarantees: { idempotentStart: false, enforcesTimeout: true } }, start: async () => ({ outcome: 'completed', code: 'tool_succeeded', outputDigest: `sha256:${'0'.repeat(64)}`, outputBytes: 0 }) } as Saga.ToolAdapter });
    // @ts-expect-error a trigger that is not a ToolStepTrigger does not compile (it is still decoded at run time)
    const refused = saga.drive({ kind: 'nope' }, {} as Saga.StartPlan, { input: null });
    await refused.then(
      () => expect.fail('a malformed trigger must be refused'),
      (e: unknown) => expect((e as { code?: string }).code).to.equal('VALIDATION_FAILED'),
    );
    await execution.close();
    await authority.close();
  });

  it('R6.1 runTool and recover are typed from /saga: their call, tool, options and results, not unknown', () => {
    expect(same<Parameters<typeof Saga.runTool>[0], Saga.ExecutionAuthority>(true)).to.equal(true);
    expect(same<Parameters<typeof Saga.runTool>[1], Saga.RunToolCall>(true)).to.equal(true);
    expect(same<Saga.RunToolCall['tool'], Saga.Tool>(true)).to.equal(true);
    expect(same<Saga.Tool['adapter'], Saga.ToolAdapter>(true)).to.equal(true);
    expect(same<Awaited<ReturnType<typeof Saga.runTool>>, Saga.RunToolResult>(true)).to.equal(true);
    expect(same<Saga.RunToolResult['output'], Saga.ToolOutput | null>(true)).to.equal(true);
    expect(same<Parameters<typeof Saga.recover>[1], Saga.RecoverOptions>(true)).to.equal(true);
    expect(same<Awaited<ReturnType<typeof Saga.recover>>, Saga.RecoverReport>(true)).to.equal(true);
    expect(same<Parameters<typeof Saga.runTool>[1], unknown>(false)).to.equal(false);
  });
});
