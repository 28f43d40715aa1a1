// Cancellation: a caller's AbortSignal ends its own wait at once with the signal's reason. The
// requests the call sent are aborted through the SDK (`client.send(command, { abortSignal })`);
// the control record's read is shared by every caller of the process, so a caller stops waiting
// for it rather than aborting it for the others.

/** `promise`, or a rejection with `signal.reason` as soon as the signal aborts. */
export function untilAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return promise;
  if (signal.aborted) {
    // The shared promise may still reject later: that rejection is someone else's to handle.
    promise.catch(() => undefined);
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

/** A controller that aborts when `parent` does (and can be aborted on its own); `dispose` unlinks. */
export function linkedController(parent: AbortSignal | undefined): { controller: AbortController; dispose: () => void } {
  const controller = new AbortController();
  if (parent === undefined) return { controller, dispose: () => undefined };
  if (parent.aborted) {
    controller.abort(parent.reason);
    return { controller, dispose: () => undefined };
  }
  const onAbort = (): void => controller.abort(parent.reason);
  parent.addEventListener('abort', onAbort, { once: true });
  return { controller, dispose: () => parent.removeEventListener('abort', onAbort) };
}

/** The check every public call makes first: a signal given must be an AbortSignal. */
export function checkSignal(signal: unknown): AbortSignal | undefined {
  if (signal === undefined) return undefined;
  if (!(signal instanceof AbortSignal)) {
    throw new TypeError(`signal must be an AbortSignal, got ${signal === null ? 'null' : typeof signal}`);
  }
  return signal;
}
