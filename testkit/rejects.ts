/** The error a promise rejects with; fails the spec if it resolves. */
export const rejects = async (p: Promise<unknown>): Promise<Error> => {
  try {
    await p;
  } catch (e) {
    return e as Error;
  }
  throw new Error('expected a rejection');
};
