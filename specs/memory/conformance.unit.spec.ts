import { openMemoryStartBarrier } from '../../infrastructure/memory/memoryAuthority';
import { conformanceSuite } from '../conformance/startBarrierConformance';

conformanceSuite({ name: 'in-memory', open: (hook) => openMemoryStartBarrier(hook ? { hooks: { onStartStep: hook } } : {}) });
