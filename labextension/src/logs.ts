/**
 * `/logs JOB --follow` in a notebook (crystal_kernel/jupyter/jobs_view.py) is a bounded
 * box (`[data-job] pre`, at most 30em high) that the kernel redraws as the job writes.
 * Like a terminal's tail, the box shows its newest line: each redraw scrolls it to the
 * bottom, unless the person scrolled up to read, in which case it stays where they
 * left it until they scroll back down.
 */
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';

const LOG_SELECTOR = '.jp-OutputArea-output [data-job] pre';
/** Closer to the bottom than this (px) counts as following. */
const SLACK = 8;

interface IPlace {
  following: boolean;
  top: number;
}

function watch(panel: NotebookPanel): void {
  // By job id: a redraw replaces the box, so its place is kept beside it.
  const places = new Map<string, IPlace>();
  const seen = new WeakSet<HTMLElement>();
  const settle = () => {
    panel.content.node.querySelectorAll<HTMLElement>(LOG_SELECTOR).forEach(box => {
      const job = box.closest<HTMLElement>('[data-job]')?.dataset.job ?? '';
      const place = places.get(job) ?? { following: true, top: 0 };
      places.set(job, place);
      if (!seen.has(box)) {
        seen.add(box);
        box.addEventListener('scroll', () => {
          place.following = box.scrollHeight - box.scrollTop - box.clientHeight <= SLACK;
          place.top = box.scrollTop;
        });
      }
      const top = place.following ? box.scrollHeight : place.top;
      if (Math.abs(box.scrollTop - top) > 1 && (place.following || box.scrollTop === 0)) {
        box.scrollTop = top;
      }
    });
  };
  let pending = 0;
  const observer = new MutationObserver(() => {
    if (!pending) {
      pending = window.requestAnimationFrame(() => {
        pending = 0;
        settle();
      });
    }
  });
  observer.observe(panel.content.node, { childList: true, subtree: true });
  panel.disposed.connect(() => observer.disconnect());
}

export function followLogs(tracker: INotebookTracker): void {
  tracker.forEach(watch);
  tracker.widgetAdded.connect((_, panel) => watch(panel));
}
