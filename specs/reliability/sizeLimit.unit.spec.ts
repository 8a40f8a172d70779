import { expect } from 'chai';
import { MAX_COMMAND_BYTES, decodeStartCommand } from '../../domain';
import { buildScenario } from '../../domain/scenario';
import { expectIssue } from '../support/validation';

// Found by the reliability fuzz: the content checks ran over the whole input before
// the R1.1 size limit, so the cost of a refusal grew with the size of what was sent (a 400 KB
// command took seconds). The limit is now the first gate; content is read only within it.

describe('R1.1 the size limit is checked before the content', () => {
  const command = buildScenario({ prefix: 'size' }).startCommand();
  const filler = (bytes: number) => Object.fromEntries(Array.from({ length: Math.ceil(bytes / 8000) }, (_, i) => [`note.${i}`, 'a'.repeat(8000)]));

  it('R1.1 an oversized command is refused as too large at (root), whatever else is wrong in it', () => {
    const error = expectIssue(
      () => decodeStartCommand({ ...command, startId: 'https://evil.example/x', annotations: { ...filler(MAX_COMMAND_BYTES), bad: 'x' } }),
      '(root)',
      'too_large',
    );
    expect(error.issues).to.have.length(1);
  });

  it('R1.1/R1.5 within the limit every content issue is still reported with its path', () => {
    const error = expectIssue(() => decodeStartCommand({ ...command, startId: 'https://evil.example/x', annotations: filler(20_000) }), 'startId', 'forbidden_value');
    expect(error.issues.some((i) => i.reason === 'too_large')).to.equal(false);
  });
});
