/**
 * A notebook follows new text while the person is at its end, as chat UIs do: when the
 * notebook grows (an answer streams, a card or form appears) and the end of its last
 * cell was in view, the notebook scrolls so that it stays in view. Scrolling up stops
 * this; scrolling back to the end starts it again.
 *
 * "In view" means the last cell's bottom edge is at most `SLACK` pixels below the
 * bottom of the notebook's scrolling area (JupyterLab may keep space under the last
 * cell: the end of the cells counts, not the end of that space). Only the person's own
 * scrolling (a scroll within a second of their wheel, touch, key or pointer) changes the
 * decision: a scroll this module made itself, or one the page's growth or a clamp caused,
 * does not, and while following such a scroll is undone.
 *
 * Applies to Crystal notebooks, and to any notebook while a Crystal answer streams in it
 * (`%%crystal`).
 */
import type { NotebookPanel } from '@jupyterlab/notebook';

/** How far below the visible area the end of the last cell may be and still count as "at the end". */
export const SLACK = 48;

/** How long after the person's input (ms) a scroll counts as theirs. */
const PERSON_MS = 1000;

/** How far the end of the last cell is below the bottom of the visible area (px), or null. */
function gap(panel: NotebookPanel): number | null {
  const notebook = panel.content;
  const cells = notebook.widgets;
  const last = cells[cells.length - 1];
  const outer = notebook.outerNode;
  if (!last || !last.node.isConnected || !outer.isConnected) {
    return null;
  }
  return last.node.getBoundingClientRect().bottom - outer.getBoundingClientRect().bottom;
}

function atEnd(panel: NotebookPanel): boolean {
  const g = gap(panel);
  return g !== null && g <= SLACK;
}

/** Make `panel` follow new text at its end while `applies()` says so. */
export function followNewText(panel: NotebookPanel, applies: () => boolean): void {
  const outer = panel.content.outerNode;
  let following = false;
  let ownTop: number | null = null; // the scrollTop this module last set
  // When the person last wheeled, touched, pressed a key or a button: only a scroll
  // that follows such input is theirs. Others are the page's own (with real-time
  // collaboration an answer's output is cleared and refilled in two steps, and the
  // browser clamps the scroll position to the top in between) and keep the decision.
  let personAt = 0;
  const person = () => {
    personAt = Date.now();
  };
  for (const kind of ['wheel', 'touchmove', 'keydown', 'pointerdown']) {
    outer.addEventListener(kind, person, { passive: true, capture: true });
  }
  outer.addEventListener(
    'scroll',
    () => {
      if (ownTop !== null && Math.abs(outer.scrollTop - ownTop) <= 1) {
        return; // our own scroll
      }
      ownTop = null;
      if (Date.now() - personAt > PERSON_MS) {
        if (following && applies()) {
          requestAnimationFrame(() => {
            const g = gap(panel);
            if (following && g !== null && g > 0) {
              outer.scrollTop += g;
              ownTop = outer.scrollTop;
            }
          });
        }
        return;
      }
      following = atEnd(panel);
    },
    { passive: true }
  );
  const observer = new ResizeObserver(() => {
    if (following && applies()) {
      const g = gap(panel);
      if (g !== null && g > 0) {
        outer.scrollTop += g;
        ownTop = outer.scrollTop;
      }
    }
    following = following || atEnd(panel);
  });
  void panel.revealed.then(() => {
    if (!panel.isDisposed) {
      following = atEnd(panel);
      observer.observe(panel.content.viewportNode);
    }
  });
  panel.disposed.connect(() => observer.disconnect());
}
