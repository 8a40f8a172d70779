import { expect } from 'chai';
import { ValidationError, type ValidationIssue, type ValidationReason } from '../../domain';

/** Run `fn`, which must throw the typed ValidationError; return it for further checks. */
export const validationErrorOf = (fn: () => unknown): ValidationError => {
  let thrown: unknown;
  try {
    fn();
  } catch (e) {
    thrown = e;
  }
  expect(thrown, 'expected a ValidationError, nothing was thrown').to.be.instanceOf(ValidationError);
  const error = thrown as ValidationError;
  expect(error.code).to.equal('VALIDATION_FAILED');
  expect(error.issues).to.be.an('array').that.is.not.empty;
  return error;
};

/** `fn` throws a ValidationError with (at least) this issue: exact path and reason. */
export const expectIssue = (fn: () => unknown, path: string, reason: ValidationReason): ValidationError => {
  const error = validationErrorOf(fn);
  const found = error.issues.some((i: ValidationIssue) => i.path === path && i.reason === reason);
  expect(found, `expected an issue {path: ${path}, reason: ${reason}}, got ${JSON.stringify(error.issues)}`).to.equal(true);
  return error;
};
