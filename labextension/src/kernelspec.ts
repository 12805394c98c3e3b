/**
 * Which kernels are Crystal's: recognised by what their kernelspec declares, whatever
 * they are called (`crystal kernel install --name crystal-ollama` included).
 *
 * A kernelspec is Crystal's when its `metadata.crystal` is true (crystal_kernel/jupyter/
 * kernelspec.py writes it), or, for kernelspecs installed before that, when its argv runs
 * `crystal_kernel.jupyter`. The name `crystal` always counts (the launcher's own).
 */
import type { KernelSpec } from '@jupyterlab/services';

/** The kernelspec the launcher entry and tours create notebooks with. */
export const KERNEL_NAME = 'crystal';

let specs: KernelSpec.ISpecModels | null = null;
const listeners: (() => void)[] = [];

/** Follow the server's kernelspecs (call once, at activation). */
export function watchKernelSpecs(manager: KernelSpec.IManager): void {
  specs = manager.specs;
  manager.specsChanged.connect((_, value) => {
    specs = value;
    listeners.forEach(listener => listener());
  });
}

/** Call `listener` when the kernelspecs arrive or change: a kernel that was not known to
 * be Crystal's (its kernelspec not loaded yet, e.g. right after a page reload) may be. */
export function onKernelSpecsChanged(listener: () => void): void {
  listeners.push(listener);
}

/** Whether the kernelspec called `name` is a Crystal kernel. */
export function isCrystalKernel(name: string | null | undefined): boolean {
  if (!name) {
    return false;
  }
  if (name === KERNEL_NAME) {
    return true;
  }
  const spec = specs?.kernelspecs?.[name];
  if (!spec) {
    return false;
  }
  if ((spec.metadata as any)?.crystal === true) {
    return true;
  }
  return Array.isArray(spec.argv) && spec.argv.includes('crystal_kernel.jupyter');
}

/** Whether the server's kernelspecs have arrived (until then nothing is known). */
export function kernelSpecsKnown(): boolean {
  return !!specs?.kernelspecs;
}

/** The name of an installed Crystal kernelspec to create notebooks with: `crystal` when
 * it is installed, else the first other Crystal kernelspec; null when there is none
 * (right after `pip install`, before `crystal kernel install`). */
export function installedCrystalSpec(): string | null {
  const all = specs?.kernelspecs ?? {};
  if (all[KERNEL_NAME]) {
    return KERNEL_NAME;
  }
  return Object.keys(all).find(name => isCrystalKernel(name)) ?? null;
}

/** What the launcher and the command say when no Crystal kernelspec is installed. */
export const NO_KERNELSPEC =
  'No Crystal kernel is installed in this Jupyter: the package is, but its kernelspec is not. ' +
  'In a terminal of the same environment run "crystal kernel install --user", then reload this page.';
