/**
 * The Crystal REST API (crystal_kernel/jupyter/server_ext.py), through JupyterLab's
 * ServerConnection so the token / XSRF cookie go along with every request.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

export interface ISessionRow {
  id: string;
  topic: string | null;
  created: string;
  updated: string;
  turns: number;
  tokens: number;
  /** The folder (relative to the server root, "" for the root) the session lives in. */
  workspace?: string;
  /** The notebook that used the session last, when one did. */
  notebook?: string | null;
  /** False when the session's last prompt got no answer (its request failed or was stopped). */
  answered?: boolean;
  /** The first prompt, shortened and made safe: names the session while it has no topic. */
  prompt?: string | null;
  /** False when this Crystal Home did not sign the session's last save (TRUST-7). */
  signed?: boolean;
}

export interface IPart {
  kind: 'text' | 'image' | 'tool_call' | 'tool_result';
  text?: string;
  /** Text parts: the text as Markdown rendered and sanitized by the server (TRUST-1). */
  html?: string;
  name?: string;
  arguments?: string;
  ok?: boolean;
  mimeType?: string;
}

export interface IMessage {
  role: string;
  interrupted: boolean;
  summary: boolean;
  parts: IPart[];
}

export interface ITranscript {
  id: string;
  topic: string | null;
  mode: string | null;
  approval: string | null;
  provider: string | null;
  model: string | null;
  turns: number;
  tokens: number;
  updated: string;
  droppedMessages: number;
  messages: IMessage[];
}

export interface IJobRow {
  session: string;
  id: string;
  command: string;
  state: string;
  exitCode: number | null;
  signal: string | null;
  started: string | null;
  ended: string | null;
  runtime: number | null;
  bytes: number;
  stoppable: boolean;
  workspace?: string;
  /** Job ids count per session (j1, j2, …): the row says whose job it is. */
  sessionTopic?: string | null;
  notebook?: string | null;
}

export interface ILogChunk {
  offset: number;
  next: number;
  dropped: number;
  end: number;
  text: string;
  state: string;
  exitCode: number | null;
  signal: string | null;
  runtime: number | null;
}

export interface IPromptSet {
  name: string;
  title: string;
  description: string;
  enabled: boolean;
}

export interface IPromptSets {
  selected: string;
  selectedBy: string;
  sets: IPromptSet[];
  notes: string[];
  message?: string;
}

export interface IAttachment {
  name: string;
  title: string;
  description: string;
  source: string;
  enabled: boolean;
  order: number | null;
  position: number | null;
  modes: string[];
}

export interface IAttachments {
  attachments: IAttachment[];
  notes: string[];
  message?: string;
}

export interface IStatus {
  session: string | null;
  mode: string | null;
  approval: string | null;
  provider: string | null;
  model: string | null;
  promptSet: string | null;
  tokens?: number;
  busy?: boolean;
  error?: string;
}

/** An error reply of the API: its one-line English message. */
export class CrystalError extends Error {}

/** No source to ask: the kernels run elsewhere and no Crystal notebook is open. */
export class NoSourceError extends CrystalError {}

/** The sidebar's current source; throws NoSourceError when there is none. */
export type SourceGetter = () => ISource;

export async function request<T>(
  path: string,
  init: RequestInit = {},
  query: Record<string, string | number | undefined> = {}
): Promise<T> {
  const settings = ServerConnection.makeSettings();
  const params = Object.entries(query)
    .filter(([, v]) => v !== undefined && v !== '')
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`)
    .join('&');
  const url =
    URLExt.join(settings.baseUrl, 'crystal', 'api', path) + (params ? `?${params}` : '');
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(url, init, settings);
  } catch (error) {
    throw new CrystalError(`The Jupyter server cannot be reached: ${error}`);
  }
  let data: any = null;
  try {
    data = await response.json();
  } catch {
    data = null;
  }
  if (!response.ok) {
    const message = (data && (data.error || data.message)) || response.statusText;
    throw new CrystalError(String(message));
  }
  return data as T;
}

function post<T>(path: string, body: unknown): Promise<T> {
  return request<T>(path, { method: 'POST', body: JSON.stringify(body) });
}

/** Where the sidebar's data comes from: the server's REST API, or (for a kernel that
 * runs elsewhere, through a gateway) the kernel itself over a comm (kernelsource.ts). */
export interface ISource {
  /** Shown under the sidebar's title: where the data comes from. */
  readonly label: string;
  sessions(): Promise<{ sessions: ISessionRow[] }>;
  transcript(id: string): Promise<ITranscript>;
  jobs(): Promise<{ jobs: IJobRow[] }>;
  log(session: string, job: string, offset?: number): Promise<ILogChunk>;
  stop(session: string, job: string): Promise<{ message: string }>;
  promptSets(): Promise<IPromptSets>;
  promptSetAction(action: 'enable' | 'disable', name?: string): Promise<IPromptSets>;
  attachments(): Promise<IAttachments>;
  attachmentAction(action: 'enable' | 'disable' | 'up' | 'down', name: string): Promise<IAttachments>;
}

/** What the server says about itself: `gateway` is true when its kernels run
 * elsewhere (`--gateway-url`), so `.crystal/` on its own disk is not theirs. */
export interface IServerInfo {
  gateway: boolean;
}

export const serverInfo = () => request<IServerInfo>('info');

export const api = {
  label: '',
  sessions: () => request<{ sessions: ISessionRow[] }>('sessions'),
  transcript: (id: string) => request<ITranscript>(`sessions/${encodeURIComponent(id)}`),
  status: (session: string) => request<IStatus>('status', {}, { session }),
  jobs: () => request<{ jobs: IJobRow[] }>('jobs'),
  log: (session: string, job: string, offset?: number) =>
    request<ILogChunk>(
      `jobs/${encodeURIComponent(session)}/${encodeURIComponent(job)}/log`,
      {},
      { offset }
    ),
  stop: (session: string, job: string) =>
    post<{ message: string }>(
      `jobs/${encodeURIComponent(session)}/${encodeURIComponent(job)}/stop`,
      {}
    ),
  promptSets: () => request<IPromptSets>('promptsets'),
  promptSetAction: (action: 'enable' | 'disable', name?: string) =>
    post<IPromptSets>('promptsets', name ? { action, name } : { action }),
  attachments: () => request<IAttachments>('attachments'),
  attachmentAction: (action: 'enable' | 'disable' | 'up' | 'down', name: string) =>
    post<IAttachments>('attachments', { action, name })
};
