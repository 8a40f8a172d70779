/** The error a promise rejects with; fails the spec if it resolves. */
export const rejects = async (p: Promise<unknown>): Promise<Error> => {
  try {
    await p;
  } catch (e) {
    return e as Error;
  }
  throw new Error('expected a rejection');
};

/** The error a call throws; fails the spec if it returns. */
export const throwsError = (call: () => unknown): Error => {
  try {
    call();
  } catch (e) {
    return e as Error;
  }
  throw new Error('expected a throw');
};
