/**
 * Group commit: items are submitted one at a time, and those that arrive while earlier groups are being written
 * are written together by one call of `write` (one transaction), at most `maxGroup` at a time and at most
 * `maxInFlight` calls at once. An item waits for a free call, never for a timer: alone, it is written at once.
 * A call beside one already in flight starts only for at least `minBeside` items; fewer wait for the next free
 * call, so that a burst is not split into a full group and a string of single-item calls, each paying a whole
 * transaction.
 *
 * When a group of several fails, each of its items is written again on its own, so that one item's error (or
 * a deadlock between groups) is never another's, unless `retryAlone` says the error would recur for all of them
 * (the database is unreachable).
 */
export interface GroupCommitOptions {
  maxGroup: number;
  maxInFlight: number;
  /** Items a call needs to start while another is in flight (1: any). */
  minBeside: number;
  retryAlone: (error: unknown) => boolean;
}

interface Waiting<I, O> {
  item: I;
  resolve: (output: O) => void;
  reject: (error: unknown) => void;
}

export class GroupCommit<I, O> {
  private readonly waiting: Array<Waiting<I, O>> = [];
  private inFlight = 0;

  /** `write` returns one output per item, in the items' order. */
  constructor(
    private readonly write: (items: I[]) => Promise<O[]>,
    private readonly options: GroupCommitOptions,
  ) {}

  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      this.next();
    });
  }

  private next(): void {
    while (this.inFlight < this.options.maxInFlight && this.waiting.length > 0) {
      if (this.inFlight > 0 && this.waiting.length < this.options.minBeside) return;
      const group = this.waiting.splice(0, this.options.maxGroup);
      this.inFlight += 1;
      void this.writeGroup(group).finally(() => {
        this.inFlight -= 1;
        this.next();
      });
    }
  }

  private async writeGroup(group: Array<Waiting<I, O>>): Promise<void> {
    try {
      const outputs = await this.write(group.map((waiting) => waiting.item));
      if (outputs.length !== group.length) throw new Error(`a group of ${group.length} was written with ${outputs.length} outputs`);
      group.forEach((waiting, index) => waiting.resolve(outputs[index]));
    } catch (error) {
      if (group.length === 1 || !this.options.retryAlone(error)) {
        for (const waiting of group) waiting.reject(error);
        return;
      }
      for (const waiting of group) {
        try {
          const [output] = await this.write([waiting.item]);
          waiting.resolve(output);
        } catch (itsError) {
          waiting.reject(itsError);
        }
      }
    }
  }
}
