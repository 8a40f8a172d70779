import { expect } from 'chai';
import { ValidationError, decodeStartCommand } from '../../domain';
import { buildScenario } from '../../domain/scenario';

// R1.5's content checks run on attacker-sized text. Each case below once backtracked for
// seconds to minutes (e.g. "function" + 8,000 spaces took 70 s); with bounded quantifiers each
// decodes in milliseconds. No timing is asserted: a regression shows as a spec timeout.
describe('R1.5 content checks stay linear on adversarial text', function () {
  this.timeout(10_000);
  const command = buildScenario({ prefix: 'redos' }).startCommand();
  const cases: [string, string][] = [
    ['function + spaces', 'function' + ' '.repeat(8000)],
    ['function + stars and spaces', 'function' + ' *'.repeat(4000)],
    ['stack-like line without a closing paren', 'at ' + 'a('.repeat(4000)],
    ['stack-like line of colons', ' at x (' + ':1'.repeat(3990)],
    ['require + spaces', 'require' + ' '.repeat(8000)],
    ['one long capitalised word', 'E' + 'r'.repeat(8000)],
  ];
  for (const [name, text] of cases) {
    it(`R1.5 ${name}: decided without backtracking`, () => {
      try {
        decodeStartCommand({ ...command, annotations: { note: text } });
      } catch (e) {
        expect(e).to.be.instanceOf(ValidationError);
      }
    });
  }
});
