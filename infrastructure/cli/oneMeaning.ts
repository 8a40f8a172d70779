import type { Command } from 'commander';
import { ValidationError } from '../../domain';

/**
 * One input, one meaning (R10.1): commander lets the last of two values of an option win
 * (`--db a.db ... --db b.db` would open b.db) and drops an argument no command takes (`verify
 * extra`), so both are refused here (exit 2). A variadic option (`--attempt RUN STEP VERSION`)
 * takes its values in one go, and a flag says the same thing however often it is given.
 */
export const refuseRepeatsAndExtras = (program: Command): Command => {
  for (const cmd of [program, ...program.commands]) {
    if (cmd !== program) cmd.allowExcessArguments(false); // the root names an unknown command itself
    const given = new Set<string>();
    for (const opt of cmd.options) {
      if (!(opt.required || opt.optional) || opt.variadic) continue;
      cmd.on(`option:${opt.name()}`, () => {
        if (given.has(opt.name())) {
          throw new ValidationError('command line', [{ path: opt.long ?? opt.flags, reason: 'invalid_value', message: 'given more than once: give each option once' }]);
        }
        given.add(opt.name());
      });
    }
  }
  return program;
};
