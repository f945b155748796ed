/*
 * shmsem.pml -- a SPIN model of the shmsem protocol (docs/DESIGN.md).
 *
 * What each part stands for in libshmsem/src/, what is abstracted and why,
 * and which properties are checked: verify/MODEL.md. Run: verify/run.sh.
 * The commit and layout version the models match: verify/MODEL.md, "What
 * the models match".
 *
 * Shape. NP processes share one semaphore of N permits and W waiter slots.
 * Every critical section of the C code is one `atomic` block: the segment
 * lock serialises them, so nothing else can interleave inside one. A process
 * may die at every crash point CP inside a block (between the stores, in
 * the order the C code makes them), and outside the lock (CBL, DIE) at
 * every point that can make a difference. Dying inside a block leaves the
 * lock word naming a dead holder (lock_dirty); the next locker proves it
 * dead, takes the lock over and runs repair() first, as lock() in lock.cc
 * does. The one move that needs no lock, a K_TIMED waiter leaving by a CAS
 * on its own word (LEAVE), is offered inside the blocks too (MAYLEAVE).
 *
 * Build-time parameters (spin -D...):
 *   N          permits (1 or 2)            NP        processes (2..3)
 *   W          waiter slots (default NP)   OPS       acquire cycles per process
 *   OPS1       cycles of process 1 (default OPS)
 *   MAXCRASH   crashes per run             SHUTDOWN  process 1 shuts down last
 *   DOUBLE_RELEASE  every release is followed by a second one (-EALREADY)
 *   LTL_TERMINATES  the liveness property (with pan -a -f)
 *   TIMED      bit p: process p always waits with a deadline (K_TIMED)
 *   NO_LEAVE   the protocol before "a waiter leaves without the lock"
 *              (LEAVE, on by default: SLEFTQ/SLEFT, MODEL.md)
 *   MUT_PLAIN_GRANT, MUT_NO_SWEEP_LEFT, MUT_DEAD_GRANT_ONLY  mutations
 *              (MODEL.md)
 */

#ifndef N
#define N 1
#endif
#ifndef NP
#define NP 3
#endif
#ifndef W
#define W NP
#endif
#ifndef OPS
#define OPS 1
#endif
#ifndef OPS1
#define OPS1 OPS      /* cycles of process 1 */
#endif
#ifndef MAXCRASH
#define MAXCRASH 1
#endif
#ifndef TIMED
#define TIMED 0       /* bit p: process p is always K_TIMED */
#endif
#ifndef NO_LEAVE
#define LEAVE 1       /* a K_TIMED waiter may leave without the lock */
#endif

#define NONE 255  /* kNone */

/* LeaseState (layout.h) */
#define LFREE 1
#define LHELD 2
#define LRES  3
/* SlotState (layout.h): the futex word */
#define SFREE   1
#define SWAIT   2
#define SGRANT  3
#define SCANC   4
#define SCLOSED 5
#define SLEFTQ  6   /* left while queued (from WAITING): still linked and counted */
#define SLEFT   7   /* left, not queued (from GRANTED, CANCELLED, CLOSED) */

/* Results */
#define R_GOT      1   /* 0 with a lease */
#define R_QUEUED   2   /* waiter_start() returned 1 */
#define R_AGAIN    3   /* -EAGAIN */
#define R_SHUT     4   /* -ESHUTDOWN */
#define R_BUSY     5   /* -EBUSY */
#define R_TIMEDOUT 6   /* -ETIMEDOUT (own abandon) */
#define R_CANCELED 7   /* -ECANCELED (remote cancel) */

/* What a process asks for in one cycle */
#define K_WAIT  1      /* shmsem_acquire: no deadline, may sleep forever */
#define K_TIMED 2      /* shmsem_acquire_ex with deadline + cancel handle */
#define K_TRY   3      /* shmsem_try_acquire (or an already expired deadline) */

/* ---- shared segment ------------------------------------------------------ */
/* lease records */
byte lstate[N];     /* commit word */
byte lgen[N];
byte lowner[N];     /* owner pid (1..NP); 0 = nobody (model only, FREE) */
byte lslot[N];      /* RESERVED: the slot it is granted to */
/* waiter slots */
byte sword[W];      /* commit word and futex word */
byte slease[W];     /* GRANTED: the lease reserved for it */
byte sowner[W];
byte sticket[W];
/* core: everything below is derived ("caches") except closed/watcher/next_ticket */
byte q[W];          /* the queue, oldest first (head = q[0], tail = q[qlen-1]) */
byte qlen;          /* = core.waiting */
byte avail;
byte held;
byte reserved;
bool closed;        /* commit word of shutdown */
byte next_ticket;
byte watcher;

/* ---- the robust lock and the world around it ------------------------------ */
bool lock_dirty;    /* the lock word names a holder that died holding it */
byte deadmask;      /* bit p: process p has died (dead never comes back) */
byte budget;        /* crashes still allowed; init sets it to 0 at any time */
byte finished;      /* processes that have ended (normally or dead) */
byte asleep;        /* bit p: process p sleeps in FUTEX_WAIT on its slot's word */
byte sleeping;      /* bit w: slot[w].sleeping (acquire.cc / release.cc Dekker) */
/* the lease token {index, gen} each process holds (NONE = none) */
byte tok_l[NP + 1];
byte tok_g[NP + 1];
/* model only: the slot each live process waits on (NONE = none); a slot in
 * WAITING/GRANTED/CANCELLED/CLOSED whose owner lives must be that slot */
byte wslot[NP + 1];
#ifdef LEAVE
byte cmpl;          /* bit w: slot w's owner (K_TIMED) waits for the lock to
                     * complete, and may leave without it (waiter.cc) */
byte leftp;         /* bit p: process p left while a holder was in its
                     * critical section (it has not noticed yet) */
#endif

#define DEADP(o)     ((((deadmask) >> (o)) & 1) == 1)
#define DEADIN(v, o) ((((v) >> (o)) & 1) == 1)
#define TAIL         (qlen > 0 -> q[qlen - 1] : NONE)

/* Some record (a HELD or RESERVED lease, a non-FREE slot) belongs to a dead
 * process: what a reclamation poll would find. */
#define LDEAD(i) ((lstate[i] == LHELD || lstate[i] == LRES) && DEADP(lowner[i]))
#define SDEAD(i) (sword[i] != SFREE && DEADP(sowner[i]))
#if N == 1
#define LDEADANY LDEAD(0)
#elif N == 2
#define LDEADANY (LDEAD(0) || LDEAD(1))
#else
#error "N must be 1 or 2"
#endif
#if W == 2
#define SDEADANY (SDEAD(0) || SDEAD(1))
#elif W == 3
#define SDEADANY (SDEAD(0) || SDEAD(1) || SDEAD(2))
#elif W == 4
#define SDEADANY (SDEAD(0) || SDEAD(1) || SDEAD(2) || SDEAD(3))
#else
#error "W must be 2..4"
#endif
#define DEADREC (LDEADANY || SDEADANY)

/* A slot its owner left without the lock: garbage for the next lock holder
 * that meets it, whoever its owner is and whether it lives. LEFTC is what
 * reclamation sweeps (MUT_NO_SWEEP_LEFT: SLEFT is ignored). */
#define LEFTW(x) (sword[x] == SLEFTQ || sword[x] == SLEFT)
#ifdef MUT_NO_SWEEP_LEFT
#define LEFTC(x) (sword[x] == SLEFTQ)
#else
#define LEFTC(x) LEFTW(x)
#endif
#if W == 2
#define LEFTANY (LEFTC(0) || LEFTC(1))
#elif W == 3
#define LEFTANY (LEFTC(0) || LEFTC(1) || LEFTC(2))
#else
#define LEFTANY (LEFTC(0) || LEFTC(1) || LEFTC(2) || LEFTC(3))
#endif
/* what a reclamation pass would find */
#define RECL (DEADREC || LEFTANY)

/* ---- dying ----------------------------------------------------------------- */
/* A crash point marks the process dead and jumps to its `die` block, which
 * forgets its token and locals. A death inside the lock also marks the
 * robust lock (FUTEX_OWNER_DIED) in the same step, so nobody can take the
 * lock without running repair. */
#define GONE deadmask = deadmask | (1 << me); goto die
#define CP \
	if \
	:: budget > 0 -> budget--; lock_dirty = true; GONE \
	:: true \
	fi

/* Crash point just before taking the lock (anywhere outside the lock
 * since the last critical section: nothing shared changed in between). */
#define CBL \
	if \
	:: budget > 0 -> budget--; GONE \
	:: true \
	fi

/* Crash point while waiting (a loop option) */
#define DIE atomic { budget > 0 -> budget--; GONE }

/* lock() in lock.cc: a dead holder is taken over, then repair(). */
#define LOCK \
	if \
	:: lock_dirty -> repair(); lock_dirty = false \
	:: else \
	fi

/* Leaving the critical section: the invariants of DESIGN.md section 8 hold
 * at every unlock. (A crash after the last store of a section needs no
 * crash point of its own: repair of a consistent state changes nothing, so
 * it is the same as the crash right after unlocking, which CBL covers.) */
#define UNLOCK check_inv()

/* FUTEX_WAKE(&slot[x].word, 1): wakes whoever sleeps on that word now (the
 * slot's current owner, if asleep); a wake that finds nobody is lost, and a
 * wake of a freed and reused slot is a harmless spurious wake-up. Nobody
 * sleeps on a word its owner left. */
#define WAKE(x) \
	if \
	:: sword[x] != SFREE && !LEFTW(x) -> asleep = asleep & ~(1 << sowner[x]) \
	:: else \
	fi

/* The wakes of a list (bit mask `wm`), one system call each. `CRASH` is CP
 * for wakes made under the lock, CBL for wakes made after unlocking. */
#define WAKE_LIST(CRASH) \
	i = 0; \
	do \
	:: i < W && ((wm >> i) & 1) -> CRASH; WAKE(i); i++ \
	:: i < W && !((wm >> i) & 1) -> i++ \
	:: else -> break \
	od; \
	i = 0; wm = 0

/* ---- tables.h -------------------------------------------------------------- */
/* Free lists are modelled as the sets of FREE records (the C lists are
 * rebuilt by repair and otherwise always equal those sets); pop takes the
 * lowest index. */
inline lease_pop() {
	l = 0;
	do
	:: l < N && lstate[l] != LFREE -> l++
	:: l < N && lstate[l] == LFREE -> break
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

/* slot_free(): the commit store word = FREE, then the free-list push. The
 * other fields of a FREE slot are never read; the model forgets them. */
inline slot_free(x) {
	assert(sword[x] != SFREE);  /* a double free would corrupt the free list */
	sword[x] = SFREE;
	sowner[x] = 0; sticket[x] = 0; slease[x] = NONE;
	sleeping = sleeping & ~(1 << x)   /* a stale 1 only costs a spurious wake */
}

inline queue_append(x) {
	q[qlen] = x;
	qlen++
}

inline queue_unlink(x) {
	j = 0;
	do
	:: j < qlen && q[j] != x -> j++
	:: else -> break
	od;
	assert(j < qlen);           /* unlinking a slot that is not linked */
	do
	:: j + 1 < qlen -> q[j] = q[j + 1]; j++
	:: else -> break
	od;
	qlen--;
	q[qlen] = NONE;
	j = 0
}

/* One-shot transition out of WAITING (DESIGN.md section 4). */
inline leave_waiting(x, word) {
	assert(sword[x] == SWAIT);
	sword[x] = word
}

/* ---- waiter.cc: leave_unlocked() ------------------------------------------ */
/* A K_TIMED waiter that cannot get the lock within its limit to complete
 * leaves without it: one CAS on its own word, from whatever it reads
 * (WAITING -> LEFT_QUEUED, GRANTED|CANCELLED|CLOSED -> LEFT). It owns
 * nothing afterwards (a grant is given up), wakes nobody and never touches
 * the slot again; the next lock holder that meets the slot cleans it up. */
inline leave_word(x) {
	cmpl = cmpl & ~(1 << (x));
	wslot[sowner[x]] = NONE;
	if
	:: sword[x] == SWAIT -> sword[x] = SLEFTQ
	:: sword[x] == SGRANT || sword[x] == SCANC || sword[x] == SCLOSED ->
		sword[x] = SLEFT
	:: else -> assert(false)      /* only its (live) owner leaves a slot */
	fi
}

/* The owner of slot x leaves now, while a holder is in its critical section
 * (the holder is stopped or slow: that is why the owner gives up on the
 * lock). The leave changes only x's word, so it commutes with every step of
 * the holder that does not read that word: it is offered just before each
 * read a decision depends on. Only an owner already waiting for the lock
 * to complete (cmpl) leaves; MODEL.md says why that loses nothing. The
 * owner notices (leftp) when it next moves. */
#ifdef LEAVE
#define MAYLEAVE(x) \
	if \
	:: ((cmpl >> (x)) & 1) -> leftp = leftp | (1 << sowner[x]); leave_word(x) \
	:: true \
	fi
#else
#define MAYLEAVE(x) skip
#endif

/* A left slot met by a lock holder, already unlinked: slot_free(), and the
 * watcher role passes on (watcher_leave(); the new watcher is woken with
 * the other wakes of the section, bit mask wm). */
inline left_free(x) {
	assert(LEFTW(x));
	slot_free(x);
	if
	:: watcher == x ->
		watcher = TAIL;
		if
		:: watcher != NONE -> wm = wm | (1 << watcher)
		:: else
		fi
	:: else
	fi
}

/* ---- grant.cc: pass_permit() ---------------------------------------------- */
/* Lease l leaves its holder (release, reclamation, repair step 5); the caller
 * has already taken it out of held/reserved/available. Stores in the order of
 * the C code; w = the slot granted, or NONE. With LEAVE, a loop: a head that
 * left (LEFT_QUEUED) is swept, and a head that leaves between our check and
 * the CAS WAITING -> GRANTED is swept after the CAS fails (reserved undone;
 * the lease, RESERVED already, goes to the next head, or to the pool when
 * nobody is left: then the queue is empty, INV-NOBYPASS). */
inline pass_permit(pl) {
	/* only repair step 5 passes a FREE lease, and only to a queued waiter:
	 * a FREE lease pushed on the free list again would be a second permit */
	assert(lstate[pl] != LFREE || qlen > 0);
	do
	:: qlen == 0 ->
		w = NONE;
		lstate[pl] = LFREE;           /* commit */
		lowner[pl] = 0; lslot[pl] = NONE;
		CP;                           /* RELEASE_FREED */
		avail++;
		break
	:: else ->
		w = q[0];
		MAYLEAVE(w);
		if
		:: sword[w] == SLEFTQ ->      /* left while queued: sweep it */
			queue_unlink(w);
			left_free(w);
			w = NONE
		:: else ->
			/* FIFO: the head is the WAITING slot with the smallest ticket */
			assert(sword[w] == SWAIT);
			pk = 0;
			do
			:: pk < W -> assert(sword[pk] != SWAIT || sticket[pk] >= sticket[w]); pk++
			:: else -> break
			od;
			queue_unlink(w);
			slease[w] = pl;
			lslot[pl] = w;
			pk = lgen[pl] + 1;            /* next_gen() */
			if
			:: pk == 0 -> pk = 1
			:: else
			fi;
			lgen[pl] = pk;
			pk = 0;
			CP;                           /* RELEASE_CHOSEN */
			lstate[pl] = LRES;            /* commit */
			CP;                           /* half grant, owner not yet renamed */
			lowner[pl] = sowner[w];       /* rec.owner = ws.owner, after the commit */
			CP;                           /* RELEASE_RESERVED: half grant */
			reserved++;
			MAYLEAVE(w);
#ifdef MUT_PLAIN_GRANT
			sword[w] = SGRANT;            /* mutation: a plain store */
			break
#else
			if
			:: sword[w] == SWAIT ->
				sword[w] = SGRANT;        /* CAS WAITING -> GRANTED */
				break
			:: else ->                    /* the CAS failed: it left (unlinked) */
				reserved--;
				left_free(w);
				w = NONE
			fi
#endif
		fi
	od
}

/* finish_slot(): the waiter owning slot s completes; its word is not WAITING. */
inline finish_slot() {
	if
	:: sword[s] == SGRANT ->
		l = slease[s];
		assert(l < N && lstate[l] == LRES && lslot[l] == s);
		lowner[l] = sowner[s];        /* named before HELD (see pass_permit) */
		lstate[l] = LHELD;            /* commit */
		CP;                           /* WAIT_CONSUME_COMMITTED */
		reserved--;
		held++;
		tok_l[me] = l; tok_g[me] = lgen[l];
		l = 0;
		r = R_GOT
	:: sword[s] == SCANC -> r = R_CANCELED
	:: sword[s] == SCLOSED -> r = R_SHUT
	:: else ->
		/* -ENOTRECOVERABLE: our slot was reclaimed while we live */
		assert(false)
	fi;
	slot_free(s)                      /* commit: -> FREE */
}

/* ---- waiter.cc -------------------------------------------------------------- */
/* waiter_start(): fast acquire, or enqueue. */
inline waiter_start(mayq) {
	if
	:: closed -> r = R_SHUT
	:: else ->
		l = NONE;
		if
		:: qlen == 0 -> lease_pop()
		:: else
		fi;
		if
		:: l != NONE ->
			/* FIFO: the fast path never passes a queued waiter */
			i = 0;
			do
			:: i < W -> assert(sword[i] != SWAIT); i++
			:: else -> break
			od;
			i = 0;
			lowner[l] = me;
			lslot[l] = NONE;
			g = lgen[l] + 1;              /* next_gen() */
			if
			:: g == 0 -> g = 1
			:: else
			fi;
			lgen[l] = g;
			CP;                           /* ACQUIRE_LEASE_POPPED + stores */
			lstate[l] = LHELD;            /* commit */
			CP;                           /* ACQUIRE_COMMITTED */
			avail--;
			held++;
			tok_l[me] = l; tok_g[me] = g;
			l = 0; g = 0;
			r = R_GOT
		:: else ->
			l = 0;
			if
			:: !(mayq) -> r = R_AGAIN
			:: else ->
				slot_pop();
				if
				:: s == NONE -> s = 0; r = R_BUSY
				:: else ->
					sowner[s] = me;
					slease[s] = NONE;
					t = next_ticket;
					next_ticket++;
					sticket[s] = t;
					CP;                   /* ENQUEUE_SLOT_POPPED + stores */
					/* FIFO: tickets follow arrival order */
					i = 0;
					do
					:: i < W -> assert(sword[i] != SWAIT || sticket[i] < t); i++
					:: else -> break
					od;
					i = 0;
					sword[s] = SWAIT;     /* commit */
					wslot[me] = s;
					CP;                   /* ENQUEUE_COMMITTED */
					queue_append(s);
					if
					:: watcher == NONE -> watcher = s
					:: else
					fi;
					r = R_QUEUED
				fi
			fi
		fi
	fi
}

/* complete(): abandon (timeout, own cancel, signal) or return. */
inline complete(abandon, reason) {
	if
	:: abandon && sword[s] == SWAIT ->
		queue_unlink(s);
		slot_free(s);                 /* commit: WAITING -> FREE */
		r = reason
	:: else -> finish_slot()          /* the grant (or another party) won */
	fi;
	wslot[me] = NONE;
	CP;
	w = NONE;
	if
	:: watcher == s -> watcher = TAIL; w = watcher   /* watcher_leave() */
	:: else
	fi
}

/* waiter_cancel_remote(): the canceller thread of the same process. With
 * LEAVE the commit is a CAS WAITING -> CANCELLED; if the waiter left in
 * between (LEFT_QUEUED, already unlinked), the canceller frees the slot. */
inline cancel_remote() {
	MAYLEAVE(s);
	if
	:: sticket[s] == t && sword[s] == SWAIT ->
		queue_unlink(s);
		MAYLEAVE(s);
		if
		:: sword[s] == SWAIT -> sword[s] = SCANC   /* commit (CAS) */
		:: else -> left_free(s)
		fi
	:: else
	fi
}

/* ---- release.cc -------------------------------------------------------------- */
inline release_cs() {
	l = tok_l[me]; g = tok_g[me];
#ifdef DOUBLE_RELEASE
	ol = l; og = g;
#endif
	/* a live holder's token is always valid (nobody reclaims a live owner) */
	assert(lstate[l] == LHELD && lgen[l] == g);
	held--;
	pass_permit(l);                   /* w: the slot to wake, or NONE */
	tok_l[me] = NONE; tok_g[me] = 0
}

/* A second release of the same (now stale) token {ol, og}: -EALREADY,
 * nothing changes. */
inline release_again() {
	assert(lstate[ol] != LHELD || lgen[ol] != og)
}

/* ---- shutdown.cc --------------------------------------------------------------- */
inline shutdown_cs() {
	closed = true;                    /* commit */
	CP;                               /* SHUTDOWN_CLOSED */
	do                                /* fail_queued() */
	:: qlen > 0 ->
		w = q[0];
		MAYLEAVE(w);
		if
		:: sword[w] == SLEFTQ ->      /* left while queued: sweep it */
			queue_unlink(w);
			left_free(w)
		:: else ->
			assert(sword[w] == SWAIT);
			queue_unlink(w);
			MAYLEAVE(w);
			if
			:: sword[w] == SWAIT ->
				sword[w] = SCLOSED;   /* commit (CAS) */
				CP;
				WAKE(w);              /* woken under the lock */
				CP                    /* SHUTDOWN_FAILED_ONE */
			:: else -> left_free(w)   /* it left meanwhile (unlinked) */
			fi
		fi
	:: else -> break
	od;
	w = 0;
#ifdef LEAVE
	WAKE_LIST(CP)                     /* watchers named by a sweep */
#endif
}

/* ---- reclaim.cc ------------------------------------------------------------------ */
/* Step 1 (no lock): the dead owners among the records' owners (vd), and the
 * slots left by their owners (vs), candidates whatever their owner. */
inline reclaim_scan() {
	vd = 0; vs = 0;
	i = 0;
	do
	:: i < N ->
		if
		:: (lstate[i] == LHELD || lstate[i] == LRES) && DEADP(lowner[i]) ->
			vd = vd | (1 << lowner[i])
		:: else
		fi;
		i++
	:: else -> break
	od;
	i = 0;
	do
	:: i < W ->
		if
		:: sword[i] != SFREE && DEADP(sowner[i]) -> vd = vd | (1 << sowner[i])
		:: else
		fi;
		if
		:: LEFTC(i) -> vs = vs | (1 << i)
		:: else
		fi;
		i++
	:: else -> break
	od;
	i = 0
}

/* Step 2 (under the lock): dead waiters and left slots first, then dead
 * holders (reclaim_one()). A slot is handled by its word: a queued one
 * (WAITING, LEFT_QUEUED) is unlinked; a lease still RESERVED for a GRANTED
 * or LEFT one is passed on. */
inline reclaim_cs() {
	n = 0;
	i = 0;
	do
	:: i < W ->
		if
		:: (sword[i] != SFREE && DEADIN(vd, sowner[i])) ||
		   (((vs >> i) & 1) && LEFTC(i)) ->
			if
			:: sword[i] == SWAIT || sword[i] == SLEFTQ -> queue_unlink(i)
			:: else
			fi;
			l = NONE;
			if
#ifdef MUT_NO_SWEEP_LEFT
			:: sword[i] == SGRANT -> l = slease[i]
#else
#ifdef MUT_DEAD_GRANT_ONLY
			/* mutation: a dead owner's slot passes a lease only if GRANTED */
			:: DEADIN(vd, sowner[i]) && sword[i] == SGRANT -> l = slease[i]
			:: DEADIN(vd, sowner[i]) && sword[i] != SGRANT -> skip
			:: !DEADIN(vd, sowner[i]) && sword[i] == SLEFT ->
#else
			:: sword[i] == SGRANT || sword[i] == SLEFT ->
#endif
				l = slease[i];
				if
				:: l < N && lslot[l] == i -> skip
				:: else -> l = NONE   /* LEFT from CANCELLED/CLOSED */
				fi
#endif
			:: else
			fi;
			slot_free(i);             /* commit */
			CP;
			if
			:: watcher == i ->        /* watcher_leave() */
				watcher = TAIL;
				if
				:: watcher != NONE -> wm = wm | (1 << watcher)
				:: else
				fi
			:: else
			fi;
			CP;                       /* RECLAIM_ONE */
			n++;
			if
			:: l != NONE && lstate[l] == LRES ->
				reserved--;
				pass_permit(l);
				if
				:: w != NONE -> wm = wm | (1 << w)
				:: else
				fi;
				w = 0;
				n++;
				CP                    /* RECLAIM_ONE */
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
		:: lstate[i] == LHELD && DEADIN(vd, lowner[i]) ->
			held--;
			pass_permit(i);           /* commit inside */
			if
			:: w != NONE -> wm = wm | (1 << w)
			:: else
			fi;
			w = 0;
			n++;
			CP                        /* RECLAIM_ONE */
		:: else
		fi;
		i++
	:: else -> break
	od;
	i = 0; vd = 0; vs = 0
}

/* ---- recovery.cc: repair() ------------------------------------------------------- */
/* With LEAVE, every rewrite of a slot word is a CAS from the value read (the
 * owner may leave at any moment); a slot that left (before, or by failing
 * such a CAS) becomes FREE, and a RESERVED lease whose slot left is an
 * orphan (FREE); step 5 hands it on. LEFT_QUEUED slots are not queued
 * again; a slot that leaves after its word was read for the queue is queued
 * as LEFT_QUEUED. */
inline repair() {
	/* 1. half-finished grants and returns */
	i = 0;
	do
	:: i < N ->
		if
		:: lstate[i] == LRES ->
			w = lslot[i];
			if
			:: w < W -> MAYLEAVE(w)
			:: else
			fi;
			if
			:: w < W && sword[w] == SWAIT ->
				slease[w] = i;
				MAYLEAVE(w);
				if
				:: sword[w] == SWAIT ->
					sword[w] = SGRANT;      /* roll the grant forward (CAS) */
					wm = wm | (1 << w);
					CP
				:: else ->                  /* it left: an orphan; slot swept below */
					lstate[i] = LFREE;
					lowner[i] = 0; lslot[i] = NONE;
					CP
				fi
			:: !(w < W && sword[w] == SWAIT) &&
			   !(w < W && sword[w] == SGRANT && slease[w] == i) ->
				lstate[i] = LFREE;          /* orphan (its slot FREE, or left) */
				lowner[i] = 0; lslot[i] = NONE;
				CP
			:: else
			fi;
			w = 0
		:: else
		fi;
		i++
	:: else -> break
	od;
	/* the slots: consumed grants, 2. a shutdown that died half-way, left
	 * slots; mask = the WAITING slots, queued in step 3 */
	mask = 0;
	i = 0;
	do
	:: i < W ->
		MAYLEAVE(i);
		if
		:: sword[i] == SGRANT ->
			l = slease[i];
			if
			:: !(l < N && lstate[l] == LRES && lslot[l] == i) ->
				/* consumed; its owner died in finish_slot(), so it cannot
				 * leave (a failed CAS would find LEFT: FREE all the same) */
				sword[i] = SFREE;
				sowner[i] = 0; sticket[i] = 0; slease[i] = NONE;
				sleeping = sleeping & ~(1 << i);
				CP
			:: else
			fi;
			l = 0
		:: sword[i] == SWAIT && closed ->
			MAYLEAVE(i);
			if
			:: sword[i] == SWAIT ->
				sword[i] = SCLOSED;         /* CAS */
				wm = wm | (1 << i)
			:: else ->                      /* it left */
				sword[i] = SFREE;
				sowner[i] = 0; sticket[i] = 0; slease[i] = NONE;
				sleeping = sleeping & ~(1 << i)
			fi;
			CP
		:: sword[i] == SWAIT && !closed -> mask = mask | (1 << i)
		:: sword[i] == SLEFTQ || sword[i] == SLEFT ->
			l = slease[i];
			if
			:: sword[i] == SLEFT && l < N && lstate[l] == LRES && lslot[l] == i ->
				lstate[l] = LFREE;          /* left after step 1: an orphan */
				lowner[l] = 0; lslot[l] = NONE
			:: else
			fi;
			sword[i] = SFREE;
			sowner[i] = 0; sticket[i] = 0; slease[i] = NONE;
			sleeping = sleeping & ~(1 << i);
			l = 0;
			CP
		:: else
		fi;
		i++
	:: else -> break
	od;
	/* 3. free lists, queue and counters from the record states */
	avail = 0; held = 0; reserved = 0;
	i = 0;
	do
	:: i < N ->
		if
		:: lstate[i] == LHELD -> held++
		:: lstate[i] == LRES -> reserved++
		:: else -> avail++; lowner[i] = 0; lslot[i] = NONE
		fi;
		i++
	:: else -> break
	od;
	/* the queue: the WAITING slots (mask) sorted by ticket; next_ticket
	 * above them all */
	qlen = 0;
	i = 0;
	do
	:: i < W -> q[i] = NONE; i++
	:: else -> break
	od;
	do
	:: true ->
		w = NONE; pk = 255;
		i = 0;
		do
		:: i < W ->
			if
			:: ((mask >> i) & 1) && sticket[i] < pk ->
				w = i; pk = sticket[i]
			:: else
			fi;
			i++
		:: else -> break
		od;
		if
		:: w == NONE -> break
		:: else -> mask = mask & ~(1 << w); queue_append(w)
		fi
	od;
	i = 0;
	do
	:: i < W ->
		if
		:: sword[i] == SFREE -> sowner[i] = 0; sticket[i] = 0; slease[i] = NONE;
		                        sleeping = sleeping & ~(1 << i)
		:: sword[i] != SFREE && next_ticket <= sticket[i] -> next_ticket = sticket[i] + 1
		:: else
		fi;
		i++
	:: else -> break
	od;
	/* 4. the watcher role, if its holder's slot is gone (or left) */
	if
	:: watcher == NONE || sword[watcher] == SFREE || LEFTW(watcher) ->
		watcher = TAIL;
		if
		:: watcher != NONE -> wm = wm | (1 << watcher)
		:: else
		fi
	:: else
	fi;
	/* 5. permits free while waiters queue: hand them on */
	do
	:: qlen > 0 ->
		lease_pop();
		if
		:: l == NONE -> break
		:: else ->
			avail--;
			pass_permit(l);
			if
			:: w != NONE -> wm = wm | (1 << w)
			:: else                     /* all left: back in the pool */
			fi
		fi
	:: else -> break
	od;
	i = 0; l = 0; w = 0; pk = 0; mask = 0;
	/* the wakes, still inside lock() */
	WAKE_LIST(CP)
}

/* ---- the invariants (DESIGN.md section 8), at every unlock ------------------------ */
inline check_inv() {
	pk = 0;  /* FREE */
	j = 0;   /* HELD */
	i = 0;
	mask = 0; /* RESERVED */
	do
	:: i < N ->
		if
		:: lstate[i] == LFREE -> pk++
		:: lstate[i] == LHELD ->
			j++;
			/* INV-ATTRIB: a HELD permit is reclaimable or its owner holds the token */
			assert(DEADP(lowner[i]) ||
			       (tok_l[lowner[i]] == i && tok_g[lowner[i]] == lgen[i]))
		:: lstate[i] == LRES ->
			mask++;
			/* INV-GRANT (a RESERVED lease's own owner field may still name
			 * the previous holder after a crash: it is reclaimed through
			 * its slot's owner, and renamed when the waiter takes it); its
			 * slot may have left (LEFT), keeping it until swept */
			assert(lslot[i] < W && slease[lslot[i]] == i &&
			       (sword[lslot[i]] == SGRANT || sword[lslot[i]] == SLEFT))
		:: else -> assert(false)
		fi;
		i++
	:: else -> break
	od;
	/* INV-PERMITS: records add up to N and equal the counters */
	assert(pk + j + mask == N);
	assert(pk == avail && j == held && mask == reserved);
	/* INV-QUEUE: exactly the WAITING (and LEFT_QUEUED) slots, in
	 * increasing ticket order */
	j = 0;
	i = 0;
	do
	:: i < W ->
		if
		:: sword[i] == SWAIT || sword[i] == SLEFTQ ->
			j++;
			assert(sticket[i] < next_ticket)
		:: sword[i] == SGRANT ->
			/* INV-GRANT, the other way */
			assert(slease[i] < N && lstate[slease[i]] == LRES && lslot[slease[i]] == i)
		:: else
		fi;
		/* INV-ATTRIB for slots (model only): a live owner's slot that is
		 * not left is the one it waits on */
		if
		:: sword[i] != SFREE && !LEFTW(i) && !DEADP(sowner[i]) ->
			assert(wslot[sowner[i]] == i)
		:: else
		fi;
		i++
	:: else -> break
	od;
	assert(j == qlen);
	i = 0;
	do
	:: i < qlen ->
		assert(sword[q[i]] == SWAIT || sword[q[i]] == SLEFTQ);
		assert(i == 0 || sticket[q[i - 1]] < sticket[q[i]]);
		i++
	:: else -> break
	od;
	/* INV-NOBYPASS: no permit is free while a waiter queues */
	assert(qlen == 0 || pk == 0);
	/* INV-CLOSED */
	assert(!closed || qlen == 0);
	/* INV-WATCH */
	assert(qlen == 0 || (watcher < W && sword[watcher] != SFREE));
	/* tokens: a live process's token names a HELD lease it owns; the slot
	 * it waits on is its own and not left */
	i = 1;
	do
	:: i <= NP ->
		if
		:: tok_l[i] != NONE && !DEADP(i) ->
			assert(tok_l[i] < N && lstate[tok_l[i]] == LHELD &&
			       lgen[tok_l[i]] == tok_g[i] && lowner[tok_l[i]] == i)
		:: else
		fi;
		if
		:: wslot[i] != NONE && !DEADP(i) ->
			assert(wslot[i] < W && sowner[wslot[i]] == i &&
			       sword[wslot[i]] != SFREE && !LEFTW(wslot[i]))
		:: else
		fi;
		i++
	:: else -> break
	od;
	i = 0; j = 0; pk = 0; mask = 0
}

/* ---- acquire.cc, reclaim.cc: one process ------------------------------------------ */
/* Every queued waiter sleeps with a timeout: the watcher 1 ms
 * (kWatchPeriodNs), the others kBackupPeriodNs x queue length. A wake-up by
 * timeout that finds nothing to do changes nothing (the heartbeat store is
 * abstracted), so only the wake-ups that find something are modelled, which
 * keeps stuttering cycles out of the state space:
 *   - the word left WAITING (a FUTEX_WAKE was skipped or lost);
 *   - the watcher's pass (watch_step -> reclaim(), which always takes the
 *     lock) has a dead owner to reclaim or a lock to repair;
 *   - a backup finds the heartbeat stale -- the watcher's owner is dead or
 *     the role is orphaned -- and its maybe_reclaim() or adopt_if_orphaned()
 *     has something to do. (A live watcher that is merely late, > 20 ms,
 *     also lets the backups run passes; those are the same passes that
 *     try_acquire's maybe_reclaim() runs at arbitrary times here.) */
#define STALE   (watcher >= W || sword[watcher] == SFREE || LEFTW(watcher) || \
                 DEADP(sowner[watcher]))
#define ORPHAN  (watcher >= W || sword[watcher] == SFREE || LEFTW(watcher))
#define PASS_DUE ((watcher == s && (RECL || lock_dirty)) || \
                  (watcher != s && STALE && (RECL || lock_dirty || ORPHAN)))

/* reclaim(): scan without the lock, always lock (repair runs if the last
 * owner died), reclaim the dead owners' records, wake after unlocking.
 * (A waiter dying between the scan and the lock is the same as one dying
 * at the top of its wait loop: the scan changes nothing.) */
#define RECLAIM \
	atomic { reclaim_scan() }; \
	atomic { LOCK; reclaim_cs(); UNLOCK }; \
	if \
	:: wm != 0 -> atomic { WAKE_LIST(CBL) } \
	:: else \
	fi

/* maybe_reclaim(): rate-limited to one pass per period across processes. */
#define MAYBE_RECLAIM \
	if \
	:: true                  /* another pass ran < kWatchPeriodNs ago */ \
	:: RECLAIM \
	fi

/* the waiter may leave without the lock (waiter.cc): K_TIMED only */
#ifdef LEAVE
#define LEAVER (kind == K_TIMED)
#define LEFT_ME (((leftp >> me) & 1) == 1)
#else
#define LEAVER false
#endif

proctype P(byte me) {
	byte ops, kind, r, s, t, l, g, w, i, j, n, vd, vs, pk, mask, wm;
#ifdef DOUBLE_RELEASE
	byte ol, og;                      /* the spent token */
#endif
	bool cancelled, timedout;

	do
	:: ops < (me == 1 -> OPS1 : OPS) ->
		ops++;
		if
		:: ((TIMED >> me) & 1) -> kind = K_TIMED
		:: else ->
			if
			:: kind = K_WAIT
			:: kind = K_TIMED
			:: kind = K_TRY
			fi
		fi;
		/* (no crash point here: a process without records that dies is
		 * indistinguishable from one that stops; see MODEL.md) */
		atomic { LOCK; waiter_start(kind != K_TRY); UNLOCK };
		if
		:: r == R_AGAIN ->
			/* maybe_reclaim(), one retry if it reclaimed anything, then
			 * (acquire with an expired deadline) the lock for the stats */
			if
			:: RECL || lock_dirty ->
				MAYBE_RECLAIM;
				if
				:: n > 0 -> atomic { n = 0; LOCK; waiter_start(false); UNLOCK }
				:: else
				fi
			:: else
			fi;
			if
			:: r == R_AGAIN -> atomic { LOCK; UNLOCK }
			:: else
			fi
		:: r == R_QUEUED ->
			do
			:: atomic { sword[s] != SWAIT && !LEAVER ->  /* waiter_poll() */
			            LOCK; complete(false, 0); UNLOCK };
			   break
			:: atomic { sword[s] == SWAIT && timedout && !LEAVER -> /* deadline */
			            LOCK; complete(true, R_TIMEDOUT); UNLOCK };
			   break
#ifdef LEAVE
			:: atomic { LEAVER && (sword[s] != SWAIT || timedout) ->
			            /* waiter_poll() or the deadline: complete() waits
			             * for the lock, limited by the deadline */
			            cmpl = cmpl | (1 << s) };
			   do
			   :: atomic { LEFT_ME ->     /* it left while a holder held the lock */
			               leftp = leftp & ~(1 << me); r = R_TIMEDOUT; w = NONE };
			      break
			   :: atomic { !LEFT_ME ->    /* got the lock */
			               cmpl = cmpl & ~(1 << s);
			               LOCK; complete(timedout, R_TIMEDOUT); UNLOCK };
			      break
			   :: atomic { !LEFT_ME ->    /* leave_unlocked(): no lock in time */
			               if
			               :: sword[s] == SWAIT || sword[s] == SGRANT -> r = R_TIMEDOUT
			               :: sword[s] == SCANC -> r = R_CANCELED
			               :: sword[s] == SCLOSED -> r = R_SHUT
			               :: else -> assert(false)
			               fi;
			               leave_word(s); w = NONE };
			      break
			   :: atomic { !LEFT_ME && !cancelled && sword[s] == SWAIT ->
			               /* the canceller thread, meanwhile (it gives up
			                * once the word left WAITING: not modelled) */
			               cancelled = true; LOCK; cancel_remote(); UNLOCK;
			               WAKE_LIST(skip) }
			   od;
			   break
#endif
			:: sword[s] == SWAIT && !timedout && PASS_DUE ->
			   /* watch_step() */
			   if
			   :: watcher == s ->                        /* the watcher's pass */
			      RECLAIM
			   :: else ->                                /* a backup, stale beat */
			      /* maybe_reclaim(): with the watcher gone, some backup
			       * wins the rate limit within a period; modelled as
			       * this one (a skip here could repeat forever) */
			      RECLAIM;
			      atomic { LOCK;                         /* adopt_if_orphaned() */
			               if
			               :: ORPHAN -> watcher = s
			               :: else
			               fi;
			               UNLOCK }
			   fi;
			   n = 0
			:: atomic { sword[s] == SWAIT && !timedout && !PASS_DUE ->
			            /* sleeping = 1, recheck the word, FUTEX_WAIT (one
			             * step: under sequential consistency the Dekker
			             * pair cannot miss; a word that changed first is
			             * the poll branch above) */
			            sleeping = sleeping | (1 << s); asleep = asleep | (1 << me) };
			   if
			   :: atomic { ((asleep >> me) & 1) == 0 ->   /* FUTEX_WAKE */
			               sleeping = sleeping & ~(1 << s) }
			   :: atomic { kind == K_TIMED ->             /* the deadline */
			               asleep = asleep & ~(1 << me); timedout = true;
			               sleeping = sleeping & ~(1 << s) }
			   :: atomic { sword[s] != SWAIT || PASS_DUE -> /* wake_at */
			               asleep = asleep & ~(1 << me);
			               sleeping = sleeping & ~(1 << s) }
			   :: atomic { kind == K_TIMED && !cancelled ->
			               /* the canceller thread: cancel_fire() ->
			                * waiter_cancel_remote(), then its FUTEX_WAKE */
			               cancelled = true; LOCK; cancel_remote(); UNLOCK;
			               if
			               :: sword[s] == SCANC ->
			                  asleep = asleep & ~(1 << me);
			                  sleeping = sleeping & ~(1 << s)
			               :: else
			               fi }
			   :: DIE
			   fi
			:: DIE
			od;
			/* complete() wakes the next watcher after unlocking */
			if
			:: w != NONE -> atomic { CBL; WAKE(w); w = 0 }
			:: else -> w = 0
			fi;
			s = 0; t = 0; cancelled = false; timedout = false
		:: else
		fi;
		if
		:: r == R_GOT ->
			atomic { CBL; LOCK; release_cs(); UNLOCK };
			/* release(): fence, then FUTEX_WAKE only if the waiter sleeps */
			if
			:: w != NONE ->
			   atomic { CBL;
			            if
			            :: ((sleeping >> w) & 1) -> WAKE(w)
			            :: else
			            fi;
			            w = 0 }
			:: else -> w = 0
			fi;
#ifdef LEAVE
			/* a new watcher, named when pass_permit() swept the old one */
			if
			:: wm != 0 -> atomic { WAKE_LIST(CBL) }
			:: else
			fi;
#endif
#ifdef DOUBLE_RELEASE
			atomic { LOCK; release_again(); UNLOCK; ol = 0; og = 0 };
#endif
			l = 0; g = 0
		:: else
		fi;
		r = 0; kind = 0
	:: else -> break
	od;
#ifdef SHUTDOWN
	if
	:: me == 1 -> atomic { LOCK; shutdown_cs(); UNLOCK }
	:: else
	fi;
#endif
	goto gone;
die:
	atomic {
		asleep = asleep & ~(1 << me);
		tok_l[me] = NONE; tok_g[me] = 0; wslot[me] = NONE;
		kind = 0; r = 0; s = 0; t = 0; l = 0; g = 0; w = 0; i = 0; j = 0;
		n = 0; vd = 0; vs = 0; pk = 0; mask = 0; wm = 0; ops = 0;
#ifdef DOUBLE_RELEASE
		ol = 0; og = 0;
#endif
		cancelled = false; timedout = false
	};
gone:
	finished++
}

/* After every process has ended (the crash window closed): one last
 * reclamation pass (reclaim() by anyone: dead owners, left slots), then no
 * permit may be lost: every lease FREE, every slot FREE, nobody queued. The
 * processes that ended normally stay alive (a long-lived program). */
proctype Final() {
	byte me, i, j, l, w, n, vd, vs, pk, mask, wm;
	atomic {
		reclaim_scan();
		LOCK; reclaim_cs(); UNLOCK;
		wm = 0;
		assert(avail == N && held == 0 && reserved == 0 && qlen == 0);
		i = 0;
		do
		:: i < N -> assert(lstate[i] == LFREE); i++
		:: else -> break
		od;
		i = 0;
		do
		:: i < W -> assert(sword[i] == SFREE); i++
		:: else -> break
		od;
		i = 0
	};
	goto done;
die:                                  /* (CP needs it; budget is 0 here) */
	skip;
done:
	skip
}

init {
	byte k;
	atomic {
		k = 0;
		do
		:: k < N -> lstate[k] = LFREE; lslot[k] = NONE; k++
		:: else -> break
		od;
		k = 0;
		do
		:: k < W -> sword[k] = SFREE; slease[k] = NONE; q[k] = NONE; k++
		:: else -> break
		od;
		k = 0;
		do
		:: k <= NP -> tok_l[k] = NONE; wslot[k] = NONE; k++
		:: else -> break
		od;
		k = 0;
		avail = N;
		watcher = NONE;
		next_ticket = 1;
		budget = MAXCRASH;
		k = 1;
		do
		:: k <= NP -> run P(k); k++
		:: else -> break
		od;
		k = 0
	};
	/* The crash window closes at an arbitrary moment. Without this, a state
	 * where a waiter is stuck forever would still offer "crash" as a move
	 * and would not show up as an invalid end state. */
	budget = 0;
	finished == NP;
	run Final()
}

#ifdef LTL_TERMINATES
/* Liveness under weak fairness: every run ends with every process finished
 * (a stuck or forever-polling waiter violates it). */
ltl terminates { <> (finished == NP) }
#endif
