/**
 * A streamed output hands over to its final output without a blank frame.
 *
 * The kernel ends a streamed answer (or Thinking card) in two messages, for clients that
 * keep only `display_data` (crystal_kernel/jupyter/live_outputs.py, `LiveDisplay`): the
 * streamed output is emptied, then the whole text comes as a new output right after it.
 * JupyterLab handles the two in separate tasks, and the page was painted between them
 * without the answer in 4 of 8 turns measured (the cell shrank by the answer's height
 * for a frame, then grew back). So when an output that holds streamed text is emptied in
 * place, what it showed stays where it was (inside the empty output JupyterLab put there)
 * until the next output of that output area arrives, and goes in the same task as that
 * arrival, before the page is painted; or after `WAIT_MS` if nothing arrives.
 *
 * Fed with the mutation records of a notebook's subtree (answers.ts); it moves existing
 * nodes only, never builds markup.
 */

const STREAMED = '.jp-crystal-streaming, .crystal-thinking[data-state="running"]';
const OUTPUT = 'jp-OutputArea-child';
export const WAIT_MS = 2000;

interface IHeld {
  ghost: Element;
  timer: number;
}

const held = new Map<Element, IHeld>(); // output area -> what it still shows

function drop(area: Element): void {
  const entry = held.get(area);
  if (entry) {
    held.delete(area);
    window.clearTimeout(entry.timer);
    entry.ghost.remove();
  }
}

/** The empty output JupyterLab put where `removal` took a node out (same batch). */
function slotOf(removal: MutationRecord, records: MutationRecord[]): Element | null {
  for (const record of records) {
    if (record.target !== removal.target || record.previousSibling !== removal.previousSibling) {
      continue;
    }
    for (const node of Array.from(record.addedNodes)) {
      if (node instanceof Element && !node.classList.contains(OUTPUT) && node.childElementCount === 0 && node.isConnected) {
        return node;
      }
    }
  }
  return null;
}

/** Handle a batch of mutation records of a notebook (see the module comment). */
export function handOver(records: MutationRecord[]): void {
  for (const record of records) {
    const area = record.target;
    if (!(area instanceof Element) || !area.classList.contains('jp-OutputArea')) {
      continue;
    }
    for (const node of Array.from(record.removedNodes)) {
      if (!(node instanceof Element) || !node.classList.contains(OUTPUT) || !node.querySelector(STREAMED)) {
        continue;
      }
      const slot = slotOf(record, records);
      if (slot) {
        drop(area);
        slot.appendChild(node);
        held.set(area, { ghost: node, timer: window.setTimeout(() => drop(area), WAIT_MS) });
      }
    }
    const entry = held.get(area);
    if (entry && Array.from(record.addedNodes).some(n => n instanceof Element && n.classList.contains(OUTPUT))) {
      drop(area); // the final output is in: it takes the place
    }
  }
}
