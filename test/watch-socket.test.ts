/**
 * Issue 25 item 4, the client's half: a notification that never arrived (the management API
 * refused it) is made up for at the next keepalive. The client's ping says the highest bundle
 * seq it has heard of (or holds), and a `changed` answer to it wakes a waiting watch like a
 * notification. The server's half (functions/ws.ts answering pings) is proven on the built
 * bundle in test/built-bundles.pg.test.ts.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { SocketWatch, type WebSocketLike } from '../client-web/watch-socket.js';

class FakeSocket implements WebSocketLike {
  readyState = 0;
  onopen: ((event: unknown) => void) | null = null;
  onmessage: ((event: { data: unknown }) => void) | null = null;
  onclose: ((event: unknown) => void) | null = null;
  onerror: ((event: unknown) => void) | null = null;
  readonly sent: unknown[] = [];
  send(data: string): void {
    this.sent.push(JSON.parse(data));
  }
  close(): void {
    this.readyState = 3;
  }
  open(): void {
    this.readyState = 1;
    this.onopen?.({});
  }
  receive(message: unknown): void {
    this.onmessage?.({ data: JSON.stringify(message) });
  }
}

describe('the socket watch\'s keepalive', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('pings with the highest bundle seq the device holds, and a changed answer wakes the wait', async () => {
    vi.useFakeTimers();
    let socket: FakeSocket | undefined;
    const watch = new SocketWatch({
      url: 'wss://ws.example.test/live',
      getToken: () => 'token',
      sourceId: () => 'src-1',
      connect: () => (socket = new FakeSocket()),
      pingIntervalMs: 1000,
    });
    const first = watch.wait(5, 60_000);
    await vi.waitFor(() => expect(socket).toBeDefined());
    socket?.open();
    // A fresh socket answers "changed" once: commits before it opened were not announced.
    expect(await first).toEqual({ changed: true, latestBundleSeq: 5 });

    const waiting = watch.wait(5, 60_000);
    await vi.advanceTimersByTimeAsync(1000);
    // The device holds bundle 5: the server answers only when the user is past it.
    expect(socket?.sent).toEqual([{ type: 'ping', latest_bundle_seq: 5 }]);
    socket?.receive({ type: 'changed', latest_bundle_seq: 6 });
    expect(await waiting).toEqual({ changed: true, latestBundleSeq: 6 });
    await vi.advanceTimersByTimeAsync(1000);
    expect(socket?.sent.at(-1)).toEqual({ type: 'ping', latest_bundle_seq: 6 });
    watch.close();
  });
});
