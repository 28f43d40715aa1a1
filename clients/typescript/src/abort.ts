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

/**
 * The requests of one call. The caller's signal gets one listener for the whole call, removed by
 * `dispose`; each request gets an AbortController of its own, which `abort` (the caller's abort,
 * or the call ending early) aborts. The SDK adds a listener to the signal of every request it
 * sends, so handing it one signal shared by a call's many Queries (64 shards, 16 in flight) would
 * pile up listeners on that signal past Node's limit of 10 (MaxListenersExceededWarning); a
 * request's own signal carries only the SDK's listener and is dropped when the request ends.
 */
export class RequestScope {
  private readonly live = new Set<AbortController>();
  private stopped: { readonly reason: unknown } | null = null;
  private readonly unlink: () => void;

  constructor(readonly signal: AbortSignal | undefined) {
    if (signal === undefined) {
      this.unlink = () => undefined;
    } else if (signal.aborted) {
      this.stopped = { reason: signal.reason };
      this.unlink = () => undefined;
    } else {
      const onAbort = (): void => this.abort(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      this.unlink = () => signal.removeEventListener('abort', onAbort);
    }
  }

  /** Whether the call was aborted (by its caller, or by ending early). */
  get aborted(): boolean {
    return this.stopped !== null;
  }

  /** `request` given a signal of its own that this scope's abort aborts. */
  async run<T>(request: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const controller = new AbortController();
    if (this.stopped !== null) controller.abort(this.stopped.reason);
    else this.live.add(controller);
    try {
      return await request(controller.signal);
    } finally {
      this.live.delete(controller);
    }
  }

  /** Aborts every request in flight and every later one. */
  abort(reason: unknown = new DOMException('This operation was aborted', 'AbortError')): void {
    if (this.stopped !== null) return;
    this.stopped = { reason };
    for (const controller of this.live) controller.abort(reason);
    this.live.clear();
  }

  /** Removes the listener on the caller's signal; the call is over. */
  dispose(): void {
    this.unlink();
  }
}

/** The check every public call makes first: a signal given must be an AbortSignal. */
export function checkSignal(signal: unknown): AbortSignal | undefined {
  if (signal === undefined) return undefined;
  if (!(signal instanceof AbortSignal)) {
    throw new TypeError(`signal must be an AbortSignal, got ${signal === null ? 'null' : typeof signal}`);
  }
  return signal;
}
