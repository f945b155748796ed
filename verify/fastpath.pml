/*
 * fastpath.pml -- a SPIN model of the lock-free uncontended path of shmsem
 * (libshmsem/src/fastpath.h, fastpath.cc) beside the locked path it falls
 * back to.
 *
 * What each part stands for in libshmsem/src/, what is abstracted and why,
 * and which properties are checked: verify/MODEL.md, section "The fast-path
 * model". Run: verify/run.sh --only 'fast*'.
 * The commit and layout version the models match: verify/MODEL.md, "What
 * the models match".
 *
 * Shape. NP processes, each with one thread, so one lane, share N permits
 * and NP waiter slots. Every process has a process record from the start.
 * A lease is one word, state | proc | gen (lst, lpr, lgen). The lock-free
 * steps (fast_acquire, fast_release) are one SPIN step per shared load,
 * store or CAS of the C code, interleaved with everything else. A critical
 * section under the segment lock is one `atomic` block, except the sweep of
 * the lanes that unlock() runs after it opened the gate: that runs under
 * the lock (`lk` keeps other sections out) one lane per step, so that the
 * lock-free steps interleave with it (the Dekker pair of the gate).
 * Crashes: CP inside the lock (marks the lock dirty: the next locker runs
 * repair() first), CR outside it, DIE while queued, at most MAXCRASH.
 *
 * Build-time parameters (spin -D...):
 *   NP         processes (2 or 3)             N       permits (1 or 2)
 *   OPS        acquire/release cycles each    OPS1    cycles of process 1
 *   MAXCRASH   crashes per run
 *   HOLD2      process 1 holds two leases at once in its first cycle (two
 *              acquires, then two releases): one lane, two LOOSE candidates
 *   RACE       a racer process (id NP+1, its own record and lane) releases
 *              process 1's first token concurrently with process 1
 *   DOUBLE_RELEASE  every release is followed by a second one (-EALREADY)
 *   LTL_TERMINATES  liveness, with pan -a -f (the invariant INV is checked
 *              in every state in every run, by the Monitor process)
 *   BUG_F1     finding F1 as the code had it (MODEL.md): pass_loose()'s
 *              CAS LOOSE -> HELD keeps the generation (fixed: it takes the
 *              next one); the runs that found it must still find it
 *   MUT_NO_OLD_CHECK, MUT_NO_GATE_SWEEP, MUT_NO_HANDOFF, MUT_ACQ_NO_GATE,
 *   MUT_NAME_AFTER, MUT_LOCKED_STORE  mutations (MODEL.md): each takes out
 *              one part of the protocol and must make some run fail
 */

#ifndef N
#define N 2
#endif
#ifndef NP
#define NP 3
#endif
#ifndef OPS
#define OPS 1
#endif
#ifndef OPS1
#define OPS1 OPS
#endif
#ifndef MAXCRASH
#define MAXCRASH 1
#endif

#ifdef RACE
#define NR (NP + 1)          /* the racer's process id */
#define NPROCS (NP + 1)
#else
#define NPROCS NP
#endif
#define FINAL_ID (NPROCS + 1)  /* Final's identity as a lock holder */
#define W NP                   /* waiter slots: each process waits at most once */
#define NONE 255               /* kNone */

/* lease states (layout.h LeaseState) */
#define LFREE  1   /* on the free list */
#define LHELD  2   /* held under lown (the lock path's) */
#define LRES   3   /* granted to waiter slot lslot */
#define LLOOSE 4   /* free, off the free list, named by a lane of lpr */
#define LFAST  5   /* held by process record lpr */
/* slot words (SlotState); no deadlines here, so no CANCELLED/CLOSED/LEFT */
#define SFREE  1
#define SWAIT  2
#define SGRANT 3

#define R_GOT    1
#define R_QUEUED 2

/* ---- shared segment ---------------------------------------------------- */
/* the lease word, state | proc | gen, and the record's other fields */
byte lst[N] = LFREE; /* word_state */
byte lpr[N];        /* word_proc: the process record (= process id), 0 = kNoProc */
byte lgen[N];       /* word_gen */
byte lown[N];       /* rec.owner (meaningful when HELD): a process id */
byte lslot[N] = NONE; /* rec.slot (RESERVED) */
/* waiter slots */
byte sword[W] = SFREE;
byte slease[W] = NONE;
byte sowner[W];
byte sticket[W];
/* core (derived, rebuilt by repair, except next_ticket) */
byte q[W] = NONE;   /* the queue, head first */
byte qlen;          /* core.waiting */
byte avail = N;
byte held;
byte reserved;
byte next_ticket = 1;
bool gate;          /* core.gate & kGateQueued (no shutdown here) */
/* process records: bit p of `used` = procs[p].state == USED; one lane each */
byte used = (1 << (NPROCS + 1)) - 2;  /* all registered (self_proc) */
byte lane[NPROCS + 1] = NONE;  /* procs[p].lanes[0].loose: a lease index or NONE */

/* ---- the lock and the world around it ------------------------------------ */
byte lk;            /* holder of the lock during unlock()'s sweep, else 0 */
bool lock_dirty;    /* the lock word names a holder that died holding it */
byte deadmask;      /* bit p: process p has died */
byte budget = MAXCRASH;  /* crashes still allowed; init sets it to 0 at any time */
byte finished;

/* ---- ghosts ---------------------------------------------------------------- */
byte vis;           /* bit w: slot w WAITING and visibly queued (it was
                     * WAITING at an unlock since it last became WAITING) */
byte tok_l[NPROCS + 2] = NONE;  /* the lease each process believes it holds */
byte tok_g[NPROCS + 2];
byte rel_l[NPROCS + 2] = NONE;  /* the token a process is releasing right now */
byte rel_g[NPROCS + 2];
#ifdef HOLD2
byte tok2_l = NONE;      /* process 1's first lease while it takes a second */
byte tok2_g;
#endif
byte owe[N];         /* ghost: the releaser whose CAS made lease l LOOSE and
                     * that has not yet loaded the gate after it (or finished
                     * hand_loose()); 0 once it has */
#ifdef RACE
byte rtok_l = NONE; /* process 1's first token, handed to the racer */
byte rtok_g;
byte rwins;         /* releases of that token that returned 0 */
#define DEADTOK 254 /* process 1 died before it had a token to hand over */
#endif

/* scratch of the critical sections and loops: used only inside one atomic
 * step, 0 between steps (so they cost no states), hence shared */
byte i, j, k, pk, mask, w, pl2;

#define DEADP(p)   ((((deadmask) >> (p)) & 1) == 1)
#define USED(p)    ((((used) >> (p)) & 1) == 1)

/* ---- dying ----------------------------------------------------------------- */
#define GONE \
	deadmask = deadmask | (1 << me); \
	i = 0; j = 0; k = 0; pk = 0; mask = 0; w = 0; pl2 = 0; \
	goto die
/* inside the lock: the lock word keeps naming a dead holder */
#define CP \
	if \
	:: budget > 0 -> budget--; lock_dirty = true; lk = 0; GONE \
	:: true \
	fi
/* outside the lock (as the first statement of an atomic step) */
#define CR \
	if \
	:: budget > 0 -> budget--; GONE \
	:: true \
	fi
#define DIE atomic { budget > 0 -> budget--; GONE }

/* ---- tables.h ---------------------------------------------------------------- */
inline lease_pop() {      /* the free list = the FREE leases, lowest first */
	l = 0;
	do
	:: l < N && lst[l] != LFREE -> l++
	:: l < N && lst[l] == LFREE -> break
	:: l >= N -> l = NONE; break
	od
}

inline slot_pop() {
	s = 0;
	do
	:: s < W && sword[s] != SFREE -> s++
	:: s < W && sword[s] == SFREE -> break
	:: s >= W -> s = NONE; break
	od
}

inline slot_free(x) {
	assert(sword[x] != SFREE);
	sword[x] = SFREE;
	sowner[x] = 0; sticket[x] = 0; slease[x] = NONE;
	vis = vis & ~(1 << (x))
}

inline queue_append(x) {
	q[qlen] = x;
	qlen++
}

inline queue_unlink(x) {
	k = 0;
	do
	:: k < qlen && q[k] != x -> k++
	:: else -> break
	od;
	assert(k < qlen);
	do
	:: k + 1 < qlen -> q[k] = q[k + 1]; k++
	:: else -> break
	od;
	qlen--;
	q[qlen] = NONE;
	k = 0
}

/* ---- grant.cc: pass_permit() ------------------------------------------------- */
/* Lease pl leaves its holder; the caller took it out of held/reserved. To
 * the head (RESERVED, word GRANTED), or to the pool (FREE). w: the slot. */
inline pass_permit(pl) {
	assert(lst[pl] != LFREE || qlen > 0);   /* never a second FREE push */
	assert(lst[pl] != LLOOSE && lst[pl] != LFAST);  /* the CAS came first */
	if
	:: qlen == 0 ->
		w = NONE;
		lst[pl] = LFREE; lpr[pl] = 0;       /* commit (gen kept) */
		lown[pl] = 0; lslot[pl] = NONE;
		avail++
	:: else ->
		w = q[0];
		assert(sword[w] == SWAIT);
		/* FIFO: the head has the smallest ticket of the WAITING slots */
		k = 0;
		do
		:: k < W -> assert(sword[k] != SWAIT || sticket[k] >= sticket[w]); k++
		:: else -> break
		od;
		queue_unlink(w);
		slease[w] = pl;
		lslot[pl] = w;
		lgen[pl] = lgen[pl] + 1;            /* next_gen(), in the commit */
		lst[pl] = LRES; lpr[pl] = 0;        /* commit */
		CP;                                 /* RELEASE_RESERVED: half grant */
		lown[pl] = sowner[w];
		reserved++;
		sword[w] = SGRANT;                  /* the grant */
		vis = vis & ~(1 << w)
	fi;
	w = 0
}

/* ---- fastpath.cc: pass_loose() ----------------------------------------------- */
/* LOOSE lease pl (just read LOOSE, in the same step: a CAS from a stale
 * read fails, which is the same as reading later) goes on. */
inline pass_loose(pl) {
	lown[pl] = me;                          /* rec.owner = self_owner() */
	lst[pl] = LHELD; lpr[pl] = 0;           /* CAS LOOSE -> HELD */
#ifndef BUG_F1
	lgen[pl] = lgen[pl] + 1;                /* a grant: next_gen (F1's fix) */
#endif
	owe[pl] = 0;
	CP;                                     /* ours for the instant */
	pass_permit(pl)
}

/* sweep_loose(), one step for all lanes (repair, reclaim). */
inline sweep_all() {
	j = 1;
	do
	:: j <= NPROCS && qlen > 0 ->
		if
		:: USED(j) && lane[j] != NONE && lst[lane[j]] == LLOOSE ->
			pl2 = lane[j];
			pass_loose(pl2);
			pl2 = 0
		:: else
		fi;
		j++
	:: else -> break
	od;
	j = 0
}

/* ---- recovery.cc: repair() --------------------------------------------------- */
inline repair() {
	/* 1. half-finished grants */
	i = 0;
	do
	:: i < N ->
		if
		:: lst[i] == LRES ->
			w = lslot[i];
			if
			:: w < W && sword[w] == SWAIT ->
				slease[w] = i;
				sword[w] = SGRANT;          /* roll forward */
				vis = vis & ~(1 << w);
				CP
			:: !(w < W && sword[w] == SWAIT) &&
			   !(w < W && sword[w] == SGRANT && slease[w] == i) ->
				lst[i] = LFREE; lpr[i] = 0; /* orphan */
				lown[i] = 0; lslot[i] = NONE;
				CP
			:: else
			fi;
			w = 0
		:: else
		fi;
		i++
	:: else -> break
	od;
	/* consumed grants: a GRANTED slot whose lease is not RESERVED for it */
	i = 0;
	do
	:: i < W ->
		if
		:: sword[i] == SGRANT &&
		   !(slease[i] < N && lst[slease[i]] == LRES && lslot[slease[i]] == i) ->
			slot_free(i);
			CP
		:: else
		fi;
		i++
	:: else -> break
	od;
	/* 3. free lists and counters from the words */
	avail = 0; held = 0; reserved = 0;
	i = 0;
	do
	:: i < N ->
		if
		:: lst[i] == LHELD -> held++
		:: lst[i] == LRES -> reserved++
		:: lst[i] == LFAST && USED(lpr[i]) -> skip
		:: lst[i] == LFAST && !USED(lpr[i]) ->
			lown[i] = me;                   /* HELD under the repairer */
			lst[i] = LHELD; lpr[i] = 0;     /* CAS */
			held++
		:: lst[i] == LLOOSE && USED(lpr[i]) && lane[lpr[i]] == i -> skip
		:: lst[i] == LLOOSE && !(USED(lpr[i]) && lane[lpr[i]] == i) ->
			lst[i] = LFREE; lpr[i] = 0;     /* CAS: named by no lane */
			owe[i] = 0;
			lown[i] = 0; lslot[i] = NONE;
			avail++
		:: lst[i] == LFREE -> avail++; lown[i] = 0; lslot[i] = NONE
		fi;
		i++
	:: else -> break
	od;
	/* the queue: the WAITING slots in ticket order; next_ticket above */
	qlen = 0;
	i = 0;
	do
	:: i < W -> q[i] = NONE; i++
	:: else -> break
	od;
	mask = 0;
	i = 0;
	do
	:: i < W ->
		if
		:: sword[i] == SWAIT -> mask = mask | (1 << i)
		:: else
		fi;
		if
		:: sword[i] != SFREE && next_ticket <= sticket[i] -> next_ticket = sticket[i] + 1
		:: else
		fi;
		i++
	:: else -> break
	od;
	do
	:: mask != 0 ->
		w = NONE; pk = 255;
		i = 0;
		do
		:: i < W ->
			if
			:: ((mask >> i) & 1) && sticket[i] < pk -> w = i; pk = sticket[i]
			:: else
			fi;
			i++
		:: else -> break
		od;
		mask = mask & ~(1 << w);
		queue_append(w)
	:: else -> break
	od;
	w = 0; pk = 0;
	/* 5. FREE leases while waiters queue: to the head */
	do
	:: qlen > 0 ->
		lease_pop();
		if
		:: l == NONE -> break
		:: else -> avail--; pass_permit(l)
		fi
	:: else -> break
	od;
	l = 0;
	/* 6. LOOSE leases while waiters queue */
	sweep_all();
	i = 0
}

/* lock(): a dead holder's lock is taken over, then repaired */
#define LOCK \
	if \
	:: lock_dirty -> repair(); lock_dirty = false \
	:: else \
	fi

/* ---- the invariants a lock holder leaves behind (check.cc), at unlock ---- */
inline check_inv() {
	pk = 0; mask = 0; i = 0; w = 0;
	do
	:: i < N ->
		if
		:: lst[i] == LFREE -> pk++
		:: lst[i] == LHELD -> mask++
		:: lst[i] == LRES -> w++;
			assert(lslot[i] < W && sword[lslot[i]] == SGRANT && slease[lslot[i]] == i)
		:: else
		fi;
		i++
	:: else -> break
	od;
	/* INV-PERMITS: the counters equal the words */
	assert(pk == avail && mask == held && w == reserved);
	/* INV-NOBYPASS */
	assert(qlen == 0 || pk == 0);
	/* INV-QUEUE: the WAITING slots, in ticket order */
	pk = 0;
	i = 0;
	do
	:: i < W ->
		if
		:: sword[i] == SWAIT -> pk++; assert(sticket[i] < next_ticket)
		:: sword[i] == SGRANT ->
			assert(slease[i] < N && lst[slease[i]] == LRES && lslot[slease[i]] == i)
		:: else
		fi;
		i++
	:: else -> break
	od;
	assert(pk == qlen);
	i = 0;
	do
	:: i < qlen ->
		assert(sword[q[i]] == SWAIT);
		assert(i == 0 || sticket[q[i - 1]] < sticket[q[i]]);
		i++
	:: else -> break
	od;
	i = 0; pk = 0; mask = 0; w = 0
}

/* unlock(): the gate follows the queue. If it has just opened to the queue
 * (0 -> QUEUED), the lock stays held (lk) for the sweep of the lanes that
 * follows, one lane per step (SWEEP_UNLOCK); otherwise the lock is free.
 * vis: every WAITING slot is now visibly queued. */
inline unlocked() {
	check_inv();
	vis = 0;
	i = 0;
	do
	:: i < W ->
		if
		:: sword[i] == SWAIT -> vis = vis | (1 << i)
		:: else
		fi;
		i++
	:: else -> break
	od;
	i = 0;
	lk = 0
}

inline unlock_body() {
	if
	:: qlen > 0 && !gate ->
		gate = true;                        /* gate_sync(): opened */
		op = true; lk = me
	:: else ->
		gate = (qlen > 0);                  /* gate_sync() */
		unlocked()
	fi
}

/* The sweep of unlock() (seq_cst fence, then sweep_loose()), one lane per
 * step, then gate_sync() again and the lock released. */
#ifdef MUT_NO_GATE_SWEEP
#define SWEEP_UNLOCK \
	if \
	:: op -> atomic { CP; gate = (qlen > 0); unlocked(); op = false } \
	:: else \
	fi
#else
#define SWEEP_UNLOCK \
	if \
	:: op -> \
		sk = 1; \
		do \
		:: atomic { sk <= NPROCS && qlen > 0 -> \
			CP; \
			if \
			:: USED(sk) && lane[sk] != NONE && lst[lane[sk]] == LLOOSE -> \
				pl2 = lane[sk]; pass_loose(pl2); pl2 = 0 \
			:: else \
			fi; \
			sk++ } \
		:: atomic { sk > NPROCS || qlen == 0 -> \
			CP; \
			gate = (qlen > 0); unlocked(); op = false; sk = 0; break } \
		od \
	:: else \
	fi
#endif

/* ---- the properties checked in every state (safety runs) ------------------ */
/* A release of lease l at its current gen is under way by someone alive. */
#if NPROCS == 2
#define INFLIGHT(l) ((rel_l[1] == (l) && rel_g[1] == lgen[l]) || \
                     (rel_l[2] == (l) && rel_g[2] == lgen[l]))
#elif NPROCS == 3
#define INFLIGHT(l) ((rel_l[1] == (l) && rel_g[1] == lgen[l]) || \
                     (rel_l[2] == (l) && rel_g[2] == lgen[l]) || \
                     (rel_l[3] == (l) && rel_g[3] == lgen[l]))
#elif NPROCS == 4
#define INFLIGHT(l) ((rel_l[1] == (l) && rel_g[1] == lgen[l]) || \
                     (rel_l[2] == (l) && rel_g[2] == lgen[l]) || \
                     (rel_l[3] == (l) && rel_g[3] == lgen[l]) || \
                     (rel_l[4] == (l) && rel_g[4] == lgen[l]))
#else
#error "NPROCS must be 2..4"
#endif
/* process p believes it holds lease l (at its gen), or someone releases it */
#ifdef HOLD2
#define BELIEF2(p, l) ((p) == 1 && tok2_l == (l) && tok2_g == lgen[l])
#define INVT2 (tok2_l == NONE || DEADP(1) || \
	(lgen[tok2_l] == tok2_g && \
	 ((lst[tok2_l] == LFAST && lpr[tok2_l] == 1) || \
	  (lst[tok2_l] == LHELD && lown[tok2_l] == 1))))
#define BEL2 ((tok2_l != NONE && !DEADP(1)) -> 1 : 0)
#else
#define BELIEF2(p, l) false
#define INVT2 true
#define BEL2 0
#endif
#define BELIEF(p, l) ((tok_l[p] == (l) && tok_g[p] == lgen[l]) || BELIEF2(p, l) || \
                      INFLIGHT(l))
/* INV-ATTRIB and INV-LOOSE for lease l: every lease is in one valid state;
 * a held lease (HELD: by lown; HELD_FAST: by process record lpr, in use)
 * belongs to a dead process or to a live one whose token names it at its
 * gen; a LOOSE lease is named by the lane of its process record, in use. */
#define INVL(l) \
	(lst[l] == LFREE || lst[l] == LRES || \
	 (lst[l] == LHELD && (DEADP(lown[l]) || BELIEF(lown[l], l))) || \
	 (lst[l] == LFAST && USED(lpr[l]) && (DEADP(lpr[l]) || BELIEF(lpr[l], l))) || \
	 (lst[l] == LLOOSE && USED(lpr[l]) && lane[lpr[l]] == (l)))
/* INV-ATTRIB, the token side (mutual exclusion): a live process's token
 * names a lease held by its own record (or HELD under its name) at the
 * token's gen; so no two processes believe they hold one lease. */
#define INVT(p) \
	(tok_l[p] == NONE || DEADP(p) || \
	 (lgen[tok_l[p]] == tok_g[p] && \
	  ((lst[tok_l[p]] == LFAST && lpr[tok_l[p]] == (p)) || \
	   (lst[tok_l[p]] == LHELD && lown[tok_l[p]] == (p)))))
#define BEL(p) ((tok_l[p] != NONE && !DEADP(p)) -> 1 : 0)
#if N == 1
#define INVLS INVL(0)
#define NOFREE (lst[0] != LFREE)
#elif N == 2
#define INVLS (INVL(0) && INVL(1))
#define NOFREE (lst[0] != LFREE && lst[1] != LFREE)
#else
#error "N must be 1 or 2"
#endif
#if NPROCS == 2
#define INVTS (INVT(1) && INVT(2))
#define NBEL (BEL(1) + BEL(2))
#elif NPROCS == 3
#define INVTS (INVT(1) && INVT(2) && INVT(3))
#define NBEL (BEL(1) + BEL(2) + BEL(3))
#else
#define INVTS (INVT(1) && INVT(2) && INVT(3) && INVT(4))
#define NBEL (BEL(1) + BEL(2) + BEL(3) + BEL(4))
#endif
/* while the lock is free and clean: INV-GATE (the gate follows the queue)
 * and INV-NOBYPASS (no FREE lease while anyone is queued) */
#define FREEINV (lk != 0 || lock_dirty || \
                 (gate == (qlen > 0) && (qlen == 0 || NOFREE)))
/* INV-HANDOFF: while the lock is free and clean and anyone is queued, a
 * LOOSE lease is still owed by its releaser (between its CAS and its load
 * of the gate, or in hand_loose()), alive or dead: none is left over for a
 * periodic pass to find (the watcher's, 1 ms to 10 s away). */
#define OWED(l) (lst[l] != LLOOSE || owe[l] != 0)
#if N == 1
#define OWEDALL OWED(0)
#else
#define OWEDALL (OWED(0) && OWED(1))
#endif
#define HANDOFF (lk != 0 || lock_dirty || qlen == 0 || OWEDALL)
#define INV (INVLS && INVTS && INVT2 && NBEL + BEL2 <= N && FREEINV && HANDOFF)

/* INV in every state: this process can move only in a state where INV
 * fails (it adds no states; at its end label it is a valid end state, so
 * SPIN still reports every other process blocked as an invalid end state). */
active proctype Monitor() {
end:	atomic {
		!(INV) ->
		assert(INVL(0));
#if N == 2
		assert(INVL(1));
#endif
		assert(INVTS && INVT2);
		assert(NBEL + BEL2 <= N);
		assert(FREEINV);
		assert(HANDOFF)
	}
}

/* ---- one process ----------------------------------------------------------------- */
/* fast_acquire(), one step per load and the CAS. fmax: the highest ticket
 * of a waiter visibly queued at the load of the word (ghost). */
inline fast_acquire() {
	atomic {                                /* l = lane.loose; w = word */
		l = lane[me];
		if
		:: l == NONE -> fast = false
		:: else ->
			wst = lst[l]; wpr = lpr[l]; wg = lgen[l];
			fast = (wst == LLOOSE);
			fmax = 0; i = 0;
			do
			:: i < W ->
				if
				:: ((vis >> i) & 1) && sticket[i] > fmax -> fmax = sticket[i]
				:: else
				fi;
				i++
			:: else -> break
			od;
			i = 0
		fi
	};
#ifndef MUT_ACQ_NO_GATE
	if
	:: fast ->
		atomic {                            /* the gate */
			if
			:: gate -> fast = false
			:: else -> assert(vis == 0)     /* shut: nobody visibly queued */
			fi
		}
	:: else
	fi;
#endif
	if
	:: fast ->
		atomic {                            /* CAS w -> HELD_FAST{me, gen+1} */
			if
			:: lst[l] == wst && lpr[l] == wpr && lgen[l] == wg ->
				lst[l] = LFAST; lpr[l] = me; lgen[l] = wg + 1;
				owe[l] = 0;
				tok_l[me] = l; tok_g[me] = wg + 1;
				r = R_GOT;
				/* no bypass: no waiter visibly queued at the load of the
				 * word still waits (tickets are never reused) */
				i = 0;
				do
				:: i < W -> assert(sword[i] != SWAIT || sticket[i] > fmax); i++
				:: else -> break
				od;
				i = 0
			:: else
			fi
		}
	:: else
	fi;
	l = 0; wst = 0; wpr = 0; wg = 0; fmax = 0; fast = false
}

/* waiter_start(), under the lock: with nobody queued, the free list; then
 * take_any_loose() (below, a lane per step); else queue (enqueue()). */
inline waiter_start() {
	l = NONE;
	if
	:: qlen == 0 -> lease_pop()
	:: else
	fi;
	if
	:: l != NONE ->
		i = 0;
		do
		:: i < W -> assert(sword[i] != SWAIT); i++
		:: else -> break
		od;
		i = 0;
		lslot[l] = NONE;
		lgen[l] = lgen[l] + 1;
		lst[l] = LFAST; lpr[l] = me;        /* commit */
		tok_l[me] = l; tok_g[me] = lgen[l];
		CP;                                 /* ACQUIRE_COMMITTED */
		avail--;
		r = R_GOT;
		unlock_body()
	:: l == NONE && qlen == 0 ->
		scan = true; lk = me                /* take_any_loose(), still locked */
	:: else ->
		enqueue();
		unlock_body()
	fi;
	l = 0
}

/* take_any_loose(), lane sk of process sk (in use): its lease, if LOOSE,
 * CASed to HELD_FAST{me}. One step per lane: lock-free releases go on
 * meanwhile, so a lease freed on a lane already passed is missed (the gate
 * sweep of unlock() is there for it). */
inline take_lane() {
	if
	:: USED(sk) && lane[sk] != NONE && lst[lane[sk]] == LLOOSE ->
		l = lane[sk];
		i = 0;
		do
		:: i < W -> assert(sword[i] != SWAIT); i++
		:: else -> break
		od;
		i = 0;
		lgen[l] = lgen[l] + 1;
		lst[l] = LFAST; lpr[l] = me;        /* CAS LOOSE -> HELD_FAST{me} */
		owe[l] = 0;
		tok_l[me] = l; tok_g[me] = lgen[l];
		r = R_GOT;
		l = 0;
		CP;                                 /* ACQUIRE_COMMITTED */
		sk = NPROCS
	:: else
	fi
}

/* the queue: a slot, its ticket, the commit, the links */
inline enqueue() {
	slot_pop();
	assert(s != NONE);
	sowner[s] = me;
	slease[s] = NONE;
	sticket[s] = next_ticket;
	next_ticket++;
	i = 0;                                  /* tickets follow arrival */
	do
	:: i < W -> assert(sword[i] != SWAIT || sticket[i] < sticket[s]); i++
	:: else -> break
	od;
	i = 0;
	sword[s] = SWAIT;                       /* commit */
	CP;                                     /* ENQUEUE_COMMITTED */
	queue_append(s);
	r = R_QUEUED
}

/* finish_slot(), from complete(): the grant becomes HELD_FAST{me} */
inline finish_slot() {
	assert(sword[s] == SGRANT);
	l = slease[s];
	assert(l < N && lst[l] == LRES && lslot[l] == s);
	lst[l] = LFAST; lpr[l] = me;            /* commit (gen kept) */
	tok_l[me] = l; tok_g[me] = lgen[l];
	CP;                                     /* WAIT_CONSUME_COMMITTED */
	reserved--;
	slot_free(s);                           /* commit */
	l = 0;
	r = R_GOT
}

/* release_locked(), under the lock; res: 0 or -EALREADY (1). With RACE
 * the load of the word and the CAS HELD_FAST -> HELD are two steps (the
 * lock held in between), so that the racer's lock-free release of the same
 * token can come between them; without RACE nobody else changes the word of
 * a live holder's HELD_FAST lease, and they are one. wpr: the loaded proc. */
#ifdef RACE
#define RL_SPLIT lk = me; res = 3
#else
#define RL_SPLIT skip
#endif
inline release_locked() {
	if
	:: lgen[tl] == tg && lst[tl] == LFAST ->
		wpr = lpr[tl];                      /* w = rec.word.load() */
		RL_SPLIT
	:: lgen[tl] == tg && lst[tl] == LHELD ->
		held--;
		pass_permit(tl);
		res = 0
	:: else -> res = 1                      /* -EALREADY */
	fi;
#ifndef RACE
	if
	:: res == 2 -> rl_cas()
	:: else
	fi
#endif
}

/* the CAS HELD_FAST{wpr, tg} -> HELD, then the permit goes on */
inline rl_cas() {
#ifdef MUT_LOCKED_STORE
	if                                      /* a plain store */
	:: true ->
		lown[tl] = wpr;
#else
	if
	:: lst[tl] == LFAST && lgen[tl] == tg && lpr[tl] == wpr ->
		lown[tl] = lpr[tl];                 /* rec.owner = procs[p].owner */
#endif
		lst[tl] = LHELD; lpr[tl] = 0;       /* CAS HELD_FAST -> HELD */
		CP;
		pass_permit(tl);
		res = 0
	:: else -> res = 1                      /* the CAS failed: -EALREADY */
	fi;
	wpr = 0
}

/* shmsem_release(): fast_release(), else release_locked(). The token is
 * {tl, tg}; the caller's belief ends when the call starts (rel_*). */
#ifdef RACE
#define RACE_WON \
	if \
	:: tl == rtok_l && tg == rtok_g -> rwins++; assert(rwins <= 1) \
	:: else \
	fi
#else
#define RACE_WON skip
#endif

inline release() {
	atomic {
		CR;                                 /* (holding: a crash after the acquire) */
		rel_l[me] = tl; rel_g[me] = tg;
		if
		:: tok_l[me] == tl && tok_g[me] == tg -> tok_l[me] = NONE; tok_g[me] = 0
		:: else
		fi;
#ifdef HOLD2
		if
		:: me == 1 && tok2_l == tl && tok2_g == tg -> tok2_l = NONE; tok2_g = 0
		:: else
		fi;
#endif
		res = 2;                            /* not yet known */
		fast = !gate                        /* the gate: QUEUED -> locked path */
	};
	if
	:: fast ->
		atomic {                            /* w = word; old = lane.loose */
			if
			:: lst[tl] == LFAST && lgen[tl] == tg ->
				wpr = lpr[tl];
#ifndef MUT_NO_OLD_CHECK
				if
				:: lane[me] != tl && lane[me] != NONE && lst[lane[me]] == LLOOSE ->
					fast = false
				:: else
				fi
#endif
			:: else -> fast = false
			fi
		}
	:: else
	fi;
#ifndef MUT_NAME_AFTER
	if
	:: fast -> atomic { lane[me] = tl }     /* named before it is freed */
	:: else
	fi;
#endif
	if
	:: fast ->
		atomic {
			CR;
			if                              /* CAS HELD_FAST{gen} -> LOOSE{me, gen} */
			:: lst[tl] == LFAST && lgen[tl] == tg && lpr[tl] == wpr ->
				lst[tl] = LLOOSE; lpr[tl] = me;
#ifndef MUT_NO_HANDOFF
				owe[tl] = me;               /* the hand-off is ours until the gate load */
#endif
				res = 0;
				RACE_WON
			:: else -> fast = false         /* lost: the locked path (-EALREADY) */
			fi
		}
	:: else
	fi;
#ifdef MUT_NAME_AFTER
	if
	:: res == 0 -> atomic { CR; lane[me] = tl }
	:: else
	fi;
#endif
	wpr = 0;
	if
	:: res == 0 ->
		/* the fence, then the gate: QUEUED -> hand_loose() */
#ifndef MUT_NO_HANDOFF
		atomic {
			CR; hl = gate;
			if
			:: !hl && owe[tl] == me -> owe[tl] = 0   /* shut: nothing owed */
			:: else
			fi
		};
		if
		:: hl ->
			atomic {
				lk == 0 -> LOCK;
				if
				:: qlen > 0 && lst[tl] == LLOOSE -> pass_loose(tl)
				:: else
				fi;
				if
				:: owe[tl] == me -> owe[tl] = 0
				:: else
				fi;
				unlock_body()
			};
			SWEEP_UNLOCK
		:: else
		fi;
		hl = false
#else
		skip
#endif
	:: else ->
		atomic {
			lk == 0 -> LOCK;
			release_locked();
#ifdef RACE
			if
			:: res == 3 -> skip             /* the CAS in the next step */
			:: else ->
#endif
				if
				:: res == 0 -> RACE_WON
				:: else
				fi;
				unlock_body()
#ifdef RACE
			fi
#endif
		};
#ifdef RACE
		if
		:: res == 3 ->
			atomic {
				rl_cas();
				if
				:: res == 0 -> RACE_WON
				:: else
				fi;
				unlock_body()
			}
		:: else
		fi;
#endif
		SWEEP_UNLOCK
	fi;
	rel_l[me] = NONE; rel_g[me] = 0
}

/* A waiter has something to do when the watcher's pass (reclaim(), which
 * always takes the lock and sweeps) would find something: a lock to repair,
 * a record of a dead process, a LOOSE lease while anyone is queued. */
#define LDEAD(i) ((lst[i] == LHELD && DEADP(lown[i])) || (lst[i] == LFAST && DEADP(lpr[i])))
#define SDEAD(i) (sword[i] != SFREE && DEADP(sowner[i]))
#define LLOOSEQ(i) (lst[i] == LLOOSE)
#if N == 1
#define LDEADANY LDEAD(0)
#define LOOSEANY LLOOSEQ(0)
#else
#define LDEADANY (LDEAD(0) || LDEAD(1))
#define LOOSEANY (LLOOSEQ(0) || LLOOSEQ(1))
#endif
#if W == 2
#define SDEADANY (SDEAD(0) || SDEAD(1))
#else
#define SDEADANY (SDEAD(0) || SDEAD(1) || SDEAD(2))
#endif
#define PDEADANY ((used & deadmask) != 0)
#define PASS_DUE (lock_dirty || LDEADANY || SDEADANY || PDEADANY || \
                  (qlen > 0 && LOOSEANY))

/* reclaim(): under the lock (the scan without it is the same as a scan at
 * the lock: a dead process changes nothing), dead waiters, dead holders
 * (HELD, then HELD_FAST of dead records), dead process records (the LOOSE
 * leases their lanes name), then sweep_loose(). */
inline reclaim_cs() {
	i = 0;
	do
	:: i < W ->
		if
		:: sword[i] != SFREE && DEADP(sowner[i]) ->
			if
			:: sword[i] == SWAIT -> queue_unlink(i)
			:: else
			fi;
			l = NONE;
			if
			:: sword[i] == SGRANT -> l = slease[i]
			:: else
			fi;
			slot_free(i);                   /* commit */
			CP;
			if
			:: l != NONE && lst[l] == LRES ->
				reserved--;
				pass_permit(l);
				CP
			:: else
			fi;
			l = 0
		:: else
		fi;
		i++
	:: else -> break
	od;
	i = 0;
	do
	:: i < N ->
		if
		:: lst[i] == LHELD && DEADP(lown[i]) ->
			held--;
			pass_permit(i);
			CP
		:: else
		fi;
		i++
	:: else -> break
	od;
	i = 0;
	do
	:: i < N ->
		if
		:: lst[i] == LFAST && DEADP(lpr[i]) && USED(lpr[i]) ->
			lown[i] = lpr[i];
			lst[i] = LHELD; lpr[i] = 0;     /* CAS HELD_FAST -> HELD */
			CP;
			pass_permit(i);
			CP
		:: else
		fi;
		i++
	:: else -> break
	od;
	i = 1;
	do
	:: i <= NPROCS ->
		if
		:: USED(i) && DEADP(i) ->
			if
			:: lane[i] != NONE && lst[lane[i]] == LLOOSE && lpr[lane[i]] == i ->
				pl2 = lane[i];
				pass_loose(pl2);
				pl2 = 0
			:: else
			fi;
			lane[i] = NONE;
			used = used & ~(1 << i);        /* commit: the record is free */
			CP
		:: else
		fi;
		i++
	:: else -> break
	od;
	i = 0;
	sweep_all()
}


proctype P(byte me) {
	byte ops, r, s, l, sk;
	byte wst, wpr, wg, fmax, tl, tg, res;
	bool fast, op, hl, scan;
#ifdef HOLD2
	byte tl2, tg2;
#endif
	do
	:: ops < (me == 1 -> OPS1 : OPS) ->
		ops++;
#ifdef HOLD2
again:
#endif
		atomic { CR; skip };                /* a death between cycles */
		fast_acquire();
		if
		:: r != R_GOT ->
			atomic { lk == 0 -> LOCK; waiter_start() };
			if
			:: scan ->
				sk = 1;
				do
				:: atomic { sk <= NPROCS -> take_lane(); sk++ }
				:: atomic { sk > NPROCS ->
				            sk = 0; scan = false;
				            if
				            :: r != R_GOT -> enqueue()
				            :: else
				            fi;
				            unlock_body();
				            break }
				od
			:: else
			fi;
			SWEEP_UNLOCK
		:: else
		fi;
		if
		:: r == R_QUEUED ->
			do
			:: atomic { sword[s] == SGRANT && lk == 0 -> /* waiter_poll(), complete() */
			            LOCK; finish_slot(); unlock_body() };
			   SWEEP_UNLOCK;
			   break
			:: atomic { sword[s] == SWAIT && lk == 0 && PASS_DUE ->
			            /* the watcher's pass: reclaim() */
			            LOCK; reclaim_cs(); unlock_body() };
			   SWEEP_UNLOCK
			:: DIE
			od;
			s = 0
		:: else
		fi;
		assert(r == R_GOT);
#ifdef HOLD2
		if
		:: me == 1 && ops == 1 && tl2 == 0 && tg2 == 0 ->
			/* process 1 holds two leases: the first one's token aside */
			atomic {
				tl2 = tok_l[me]; tg2 = tok_g[me];   /* (a gen is never 0) */
				tok2_l = tl2; tok2_g = tg2;
				tok_l[me] = NONE; tok_g[me] = 0
			};
			r = 0;
			goto again
		:: else
		fi;
#endif
		tl = tok_l[me]; tg = tok_g[me];
#ifdef RACE
		if
		:: me == 1 && rtok_l == NONE ->
			/* a copy to the racer: from here on, two releases of it are
			 * under way, and nobody holds it in between */
			atomic {
				rtok_l = tl; rtok_g = tg;
				rel_l[me] = tl; rel_g[me] = tg;
				tok_l[me] = NONE; tok_g[me] = 0
			}
		:: else
		fi;
#endif
		release();
#ifdef DOUBLE_RELEASE
		release();
		assert(res == 1);                   /* -EALREADY */
#endif
#ifdef HOLD2
		if
		:: tg2 != 0 ->
			tl = tl2; tg = tg2; tl2 = 0; tg2 = 0;
			release()
		:: else
		fi;
#endif
		tl = 0; tg = 0; res = 0; r = 0
	:: else -> break
	od;
	goto gone;
die:
	atomic {
		tok_l[me] = NONE; tok_g[me] = 0; rel_l[me] = NONE; rel_g[me] = 0;
#ifdef RACE
		if
		:: me == 1 && rtok_l == NONE -> rtok_l = DEADTOK
		:: else
		fi;
#endif
#ifdef HOLD2
		if
		:: me == 1 -> tok2_l = NONE; tok2_g = 0
		:: else
		fi;
#endif
		ops = 0; r = 0; s = 0; l = 0; w = 0; i = 0; j = 0; k = 0; sk = 0; pk = 0;
		mask = 0; pl2 = 0; wst = 0; wpr = 0; wg = 0; fmax = 0; tl = 0; tg = 0;
		res = 0; fast = false; op = false; hl = false; scan = false
#ifdef HOLD2
		; tl2 = 0; tg2 = 0
#endif
	};
gone:
	finished++
}

#ifdef RACE
/* The racer: a process that has a copy of process 1's first token and
 * releases it while process 1 does (the same token, both through
 * shmsem_release(): "released exactly once, by any process"). */
proctype Racer(byte me) {
	byte r, s, l, sk;
	byte wst, wpr, wg, tl, tg, res;
	bool fast, op, hl;
	rtok_l != NONE;
	if
	:: rtok_l == DEADTOK -> goto gone
	:: else
	fi;
	tl = rtok_l; tg = rtok_g;
	release();
	goto gone;
die:
	atomic {
		rel_l[me] = NONE; rel_g[me] = 0;
		r = 0; s = 0; l = 0; w = 0; i = 0; j = 0; k = 0; sk = 0; pk = 0; mask = 0;
		pl2 = 0; wst = 0; wpr = 0; wg = 0; tl = 0; tg = 0; res = 0;
		fast = false; op = false; hl = false
	};
gone:
	finished++
}
#endif

/* After every process has ended (the crash window closed): one last
 * reclamation pass, then no permit is lost and nobody waits: every lease
 * FREE or LOOSE (named by a lane of a live process), every slot FREE. */
proctype Final() {
	byte me, r, s, l, sk;
	bool op;
	me = FINAL_ID;
	atomic {
		LOCK; reclaim_cs();
		gate = (qlen > 0);
		check_inv();
		assert(qlen == 0 && !gate && held == 0 && reserved == 0);
		i = 0;
		do
		:: i < N ->
			assert(lst[i] == LFREE ||
			       (lst[i] == LLOOSE && USED(lpr[i]) && !DEADP(lpr[i]) &&
			        lane[lpr[i]] == i));
			i++
		:: else -> break
		od;
		i = 0;
		do
		:: i < W -> assert(sword[i] == SFREE); i++
		:: else -> break
		od;
#ifdef RACE
		/* the racing token was released exactly once (unless a racer died) */
		assert(rwins == 1 || deadmask != 0 || rtok_l == DEADTOK);
#endif
		i = 0
	};
	goto done;
die:
	skip;
done:
	skip
}

init {
	byte x;
	atomic {
		x = 1;
		do
		:: x <= NP -> run P(x); x++
		:: else -> break
		od;
#ifdef RACE
		run Racer(NR);
#endif
		x = 0
	};
	budget = 0;
	finished == NPROCS;
	run Final()
}

#ifdef LTL_TERMINATES
ltl terminates { <> (finished == NPROCS) }
#endif
