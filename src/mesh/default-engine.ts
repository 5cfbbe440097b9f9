import { Engine } from '../decision/engine.js';
import type { EngineFactory } from './engine-port.js';

/** The real decision engine, the one every mesh node runs unless a test injects another. */
export const defaultEngineFactory: EngineFactory = (init) => new Engine(init);
