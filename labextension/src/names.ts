/**
 * One name for a session everywhere Crystal shows it (the sidebar's session list, a job
 * row's "j1 of …", a transcript's tab and heading): its topic once it has one, else its
 * first prompt (quoted, as the kernel's own notes name it), else a short id. The full id
 * stays in the tooltips.
 */

/** What the sidebar's last session list called each session (by id). */
const known = new Map<string, string>();

/** The id's own part: `20261207-220101-a1b2c3` → `a1b2c3` (the rest is its date). */
export function shortId(id: string): string {
  const match = /^\d{8}-\d{6}-([0-9a-f]+)$/.exec(id);
  return match ? match[1] : id;
}

/** A session's name from what the caller knows of it; remembered for the other views. */
export function sessionName(id: string, topic?: string | null, prompt?: string | null): string {
  const name = topic || (prompt ? `“${prompt}”` : known.get(id) || `session ${shortId(id)}`);
  if (topic || prompt) {
    known.set(id, name);
  }
  return name;
}
