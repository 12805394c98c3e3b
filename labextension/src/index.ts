/**
 * Crystal kernel's JupyterLab extension: a "Crystal" left sidebar (sessions, jobs,
 * prompts), a status bar item for Crystal notebooks, a launcher entry and a command
 * that creates a notebook with the Crystal kernel preselected; in notebooks, Copy and
 * Insert buttons on the code blocks of answers and wrapping prompt cells (answers.ts).
 */
import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette, showErrorMessage } from '@jupyterlab/apputils';
import { ILauncher } from '@jupyterlab/launcher';
import { INotebookTracker } from '@jupyterlab/notebook';
import { IStatusBar } from '@jupyterlab/statusbar';
import { LabIcon } from '@jupyterlab/ui-components';

import crystalSvg from '../style/icons/crystal.svg';
import { activateAnswers } from './answers';
import { activateCompletion } from './completion';
import { watchForms } from './forms';
import { followLogs } from './logs';
import { CrystalSidebar } from './sidebar';
import { SourcePicker } from './sources';
import {
  installedCrystalSpec,
  kernelSpecsKnown,
  NO_KERNELSPEC,
  onKernelSpecsChanged,
  watchKernelSpecs
} from './kernelspec';
import { CrystalStatus, KERNEL_NAME } from './status';
import { TranscriptView } from './transcript';

export const crystalIcon = new LabIcon({ name: 'crystal-kernel:crystal', svgstr: crystalSvg });

namespace CommandIDs {
  export const newNotebook = 'crystal:new-notebook';
  export const openSession = 'crystal:open-session';
  export const showSidebar = 'crystal:show-sidebar';
  export const refresh = 'crystal:refresh';
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'crystal-kernel:plugin',
  description: 'Crystal sidebar, status bar item, launcher entry and new-notebook command.',
  autoStart: true,
  optional: [ILauncher, ICommandPalette, INotebookTracker, IStatusBar, ILayoutRestorer],
  activate: (
    app: JupyterFrontEnd,
    launcher: ILauncher | null,
    palette: ICommandPalette | null,
    tracker: INotebookTracker | null,
    statusBar: IStatusBar | null,
    restorer: ILayoutRestorer | null
  ) => {
    const { commands, shell } = app;
    watchKernelSpecs(app.serviceManager.kernelspecs); // Crystal kernels by their kernelspec, any name
    const transcripts = new Map<string, TranscriptView>();
    // The server's disk, or the notebook's kernel when kernels run elsewhere (a gateway).
    const sources = new SourcePicker(tracker);

    commands.addCommand(CommandIDs.newNotebook, {
      label: args => (args['isLauncher'] ? 'Crystal Notebook' : 'New Crystal Notebook'),
      caption: 'Create a notebook where every cell is a turn for the Crystal agent',
      icon: args => (args['isPalette'] ? undefined : crystalIcon),
      execute: args => {
        // The installed Crystal kernelspec, whatever its name; none: say why and how,
        // never a "Select Kernel" dialog without a Crystal kernel in it.
        const kernelName = installedCrystalSpec() ?? (kernelSpecsKnown() ? null : KERNEL_NAME);
        if (!kernelName) {
          return showErrorMessage('Crystal is not installed as a kernel', NO_KERNELSPEC);
        }
        return commands.execute('notebook:create-new', { cwd: (args['cwd'] as string) || '', kernelName });
      }
    });

    commands.addCommand(CommandIDs.openSession, {
      label: 'Open Crystal Session',
      execute: args => {
        const id = String(args['id'] || '');
        if (!id) {
          return;
        }
        let source;
        try {
          source = sources.get();
        } catch {
          return;
        }
        let view = transcripts.get(id);
        if (!view || view.isDisposed) {
          view = new TranscriptView(id, source);
          transcripts.set(id, view);
          view.disposed.connect(() => transcripts.delete(id));
          shell.add(view, 'main');
        } else {
          void view.load();
        }
        shell.activateById(view.id);
      }
    });

    if (tracker) {
      activateAnswers(tracker);
      watchForms(tracker); // focus after form clicks, reload and restart
      followLogs(tracker); // /logs --follow shows its newest line
      void import('./fix').then(fix => fix.activateFix(tracker)); // NB-3: Fix with Crystal on error outputs
    }
    void activateCompletion(app); // NB-2: inline completions (registered before app.restored)
    const status = tracker && statusBar ? new CrystalStatus(tracker) : null;
    const sidebar = new CrystalSidebar(
      crystalIcon,
      sources.get,
      id => void commands.execute(CommandIDs.openSession, { id }),
      () => status?.refresh()
    );
    void sources.ready.then(() => {
      if (sidebar.isVisible) {
        void sidebar.refreshAll();
      }
    });
    // Remote kernels: the sidebar follows the current Crystal notebook's kernel.
    tracker?.currentChanged.connect(() => {
      if (sources.isRemote && sidebar.isVisible) {
        void sidebar.refreshAll();
      }
    });
    shell.add(sidebar, 'left', { rank: 650 });
    if (restorer) {
      restorer.add(sidebar, sidebar.id);
    }

    commands.addCommand(CommandIDs.showSidebar, {
      label: 'Show Crystal Sidebar',
      execute: () => shell.activateById(sidebar.id)
    });
    commands.addCommand(CommandIDs.refresh, {
      label: 'Refresh Crystal Sidebar',
      execute: () => sidebar.refreshAll()
    });

    if (launcher) {
      // The launcher offers a Crystal notebook only while a Crystal kernelspec is
      // installed (it comes and goes with the server's kernelspecs).
      let entry: { dispose(): void } | null = null;
      const place = () => {
        const installed = installedCrystalSpec() !== null;
        if (installed && !entry) {
          entry = launcher.add({ command: CommandIDs.newNotebook, category: 'Crystal', rank: 0 });
        } else if (!installed && entry) {
          entry.dispose();
          entry = null;
        }
      };
      place();
      onKernelSpecsChanged(place);
    }
    if (palette) {
      for (const command of [CommandIDs.newNotebook, CommandIDs.showSidebar, CommandIDs.refresh]) {
        palette.addItem({ command, category: 'Crystal', args: { isPalette: true } });
      }
    }

    if (status && statusBar) {
      statusBar.registerStatusItem('crystal-kernel:status', {
        item: status,
        align: 'left',
        rank: 5,
        isActive: () => status.isActive,
        activeStateChanged: status.changed
      });
    }
  }
};

export default plugin;
