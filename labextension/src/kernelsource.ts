/**
 * The sidebar's data from a Crystal kernel that runs elsewhere (Kernel Gateway,
 * Enterprise Gateway): its Home and workspace are not on the Jupyter server's disk, so
 * the sidebar asks the kernel over the `crystal.sidebar` comm
 * (crystal_kernel/jupyter/sidebar_comm.py) instead of the server's REST API. Same
 * shapes, same messages.
 *
 * One comm per kernel, opened on the first request and again after a restart (a
 * restart closes every comm). Each request waits at most REPLY_MS for its reply, and
 * at most MAX_PENDING requests wait at once.
 */
import { Kernel, KernelMessage } from '@jupyterlab/services';

import {
  CrystalError,
  IAttachments,
  IJobRow,
  ILogChunk,
  IPromptSets,
  ISessionRow,
  ISource,
  ITranscript
} from './api';

export const SIDEBAR_TARGET = 'crystal.sidebar';
const REPLY_MS = 20000;
const MAX_PENDING = 32;

interface IPending {
  resolve: (data: any) => void;
  reject: (error: Error) => void;
  timer: number;
}

interface IReply {
  id: number | null;
  ok: boolean;
  data?: any;
  error?: string;
}

export class KernelSource implements ISource {
  private comm: Kernel.IComm | null = null;
  private pending = new Map<number, IPending>();
  private nextId = 1;

  constructor(
    readonly kernel: Kernel.IKernelConnection,
    readonly label: string
  ) {}

  get isDisposed(): boolean {
    return this.kernel.isDisposed;
  }

  private open(): Kernel.IComm {
    if (this.comm && !this.comm.isDisposed) {
      return this.comm;
    }
    const comm = this.kernel.createComm(SIDEBAR_TARGET);
    comm.onMsg = (msg: KernelMessage.ICommMsgMsg) => this.onReply(msg.content.data as unknown as IReply);
    comm.onClose = () => {
      if (this.comm === comm) {
        this.comm = null;
      }
      this.failAll('The kernel closed the sidebar channel (it restarted, or it is not a Crystal kernel).');
    };
    comm.open({});
    this.comm = comm;
    return comm;
  }

  private onReply(reply: IReply): void {
    if (!reply || typeof reply.id !== 'number') {
      return; // the greeting sent on open
    }
    const waiting = this.pending.get(reply.id);
    if (!waiting) {
      return;
    }
    this.pending.delete(reply.id);
    window.clearTimeout(waiting.timer);
    if (reply.ok) {
      waiting.resolve(reply.data);
    } else {
      waiting.reject(new CrystalError(reply.error || 'The kernel could not answer.'));
    }
  }

  private failAll(message: string): void {
    for (const [id, waiting] of this.pending) {
      window.clearTimeout(waiting.timer);
      waiting.reject(new CrystalError(message));
      this.pending.delete(id);
    }
  }

  call<T>(op: string, args: Record<string, unknown> = {}): Promise<T> {
    if (this.kernel.isDisposed || this.kernel.connectionStatus !== 'connected') {
      return Promise.reject(new CrystalError('The notebook\u2019s kernel is not connected.'));
    }
    if (this.pending.size >= MAX_PENDING) {
      return Promise.reject(new CrystalError('The kernel has not answered the earlier requests yet.'));
    }
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      const timer = window.setTimeout(() => {
        this.pending.delete(id);
        reject(new CrystalError(`The kernel did not answer within ${REPLY_MS / 1000} s.`));
      }, REPLY_MS);
      this.pending.set(id, { resolve, reject, timer });
      try {
        const clean = Object.fromEntries(Object.entries(args).filter(([, v]) => v !== undefined));
        this.open().send({ id, op, args: clean } as any);
      } catch (error) {
        this.pending.delete(id);
        window.clearTimeout(timer);
        reject(new CrystalError(`The kernel cannot be reached: ${error}`));
      }
    });
  }

  info(): Promise<{ workspace: string; home: string; host: string }> {
    return this.call('info');
  }

  sessions(): Promise<{ sessions: ISessionRow[] }> {
    return this.call('sessions');
  }

  transcript(id: string): Promise<ITranscript> {
    return this.call('transcript', { id });
  }

  jobs(): Promise<{ jobs: IJobRow[] }> {
    return this.call('jobs');
  }

  log(session: string, job: string, offset?: number): Promise<ILogChunk> {
    return this.call('log', { session, job, offset });
  }

  stop(session: string, job: string): Promise<{ message: string }> {
    return this.call('stop', { session, job });
  }

  promptSets(): Promise<IPromptSets> {
    return this.call('promptsets');
  }

  promptSetAction(action: 'enable' | 'disable', name?: string): Promise<IPromptSets> {
    return this.call('promptsets_action', name ? { action, name } : { action });
  }

  attachments(): Promise<IAttachments> {
    return this.call('attachments');
  }

  attachmentAction(action: 'enable' | 'disable' | 'up' | 'down', name: string): Promise<IAttachments> {
    return this.call('attachments_action', { action, name });
  }

  dispose(): void {
    this.failAll('The sidebar stopped asking this kernel.');
    if (this.comm && !this.comm.isDisposed) {
      try {
        this.comm.close();
      } catch {
        // the kernel is gone already
      }
    }
    this.comm = null;
  }
}
