import { createAction, creditsAction, updateAction } from './key-edit-actions.js';
import { deleteAction, rotateAction, revokeAction } from './key-lifecycle-actions.js';
import { listAction, showAction, usageAction } from './key-read-actions.js';
import type { KeyAction } from './key-context.js';
import { exportAction, importAction, reencryptAction } from './keys-transfer.js';

/** Every `keygate keys` action, in the order help lists them. */
export const KEY_ACTIONS: readonly KeyAction[] = [
  createAction,
  listAction,
  showAction,
  usageAction,
  updateAction,
  creditsAction,
  rotateAction,
  revokeAction,
  deleteAction,
  exportAction,
  importAction,
  reencryptAction,
];
