/*
 * bounded.pml -- a SPIN model of shmsem's bounded policy
 * (SHMSEM_POLICY_BOUNDED, docs/DESIGN.md section 15): newcomers may take
 * free or LOOSE permits past a queue while its head is within its bound
 * (barging), a released permit goes to the pool and the head is nudged to
 * race for it; a head past its bound turns the hand-off on, and from then
 * on everything is FIFO until a new head within its bound or an empty
 * queue turns it off.
 *
 * What each part stands for in libshmsem/src/, what is abstracted and why,
 * and which properties are checked: verify/MODEL.md, section "The bounded
 * model". Run: verify/run.sh --only 'b-*'.
 *
 * Shape. NP = 3 processes, each with one thread (one lane, its process
 * record from the start, its own waiter slot: slot p is process p's),
 * share N permits (1 or 2) of weight 1. Each runs OPS acquire/release
 * cycles (process 1: OPS1). An acquire is fast_acquire() (three steps:
 * lane and word, gate, CAS), else a locked section (waiter_start():
 * take_at_once() or enqueue), then the wait: wait_turns() and sleep_once()
 * step by step (read the slot's nudge; poll; announce `sleeping`; recheck
 * the slot word; futex_wait on the nudge; woken by a FUTEX_WAKE or by the
 * bound timer). A release is fast_release() step by step (gate, lane
 * check, lane store, CAS, gate after the fence, then hand_loose() or
 * nudge_head()), or release_locked(). A critical section under the lock is
 * one `atomic` block, from Section::enter (policy_sync, sync_gate) to
 * Section::unlock (policy_sync, sync_gate, the lanes' sweep included);
 * the wake-ups it collected (Wakes::run: nudge_slot, wake_slot) are steps
 * of their own after it.
 *
 * Time. `past[w]` is "waiter w's bound has passed": an environment
 * process (Clock) sets it, at any moment, once per wait. policy_sync
 * computes hand_off = someone queues && past[head]. A waiter whose sleep
 * plan was computed before its bound passed (wake_by: the end of the
 * bound while it lies ahead) may be woken by that timer once it passed.
 * No other timer is modelled (no watcher period, no deadline): every other
 * wake-up must come from a FUTEX_WAKE.
 *
 * No crashes (MODEL.md says why).
 *
 * Build-time parameters (spin -D...):
 *   N        permits (1 or 2)                OPS, OPS1  cycles (1 or 2)
 *   NOBOUND  the Clock never runs (an endless bound: pure barging); a
 *            waiter is then woken only by FUTEX_WAKEs
 *   MUT_NO_NUDGE, MUT_NUDGE_WORD, MUT_NO_FEED, MUT_LOCKED_BARGE,
 *   MUT_FAST_ANY_GATE, MUT_READ_LATE  mutations (MODEL.md): each takes out one rule and must
 *            make some run fail
 */

#ifndef N
#define N 1
#endif
#ifndef OPS
#define OPS 1
#endif
#ifndef OPS1
#define OPS1 OPS
#endif
#define NP 3
#define NONE 255

/* lease states (layout.h), weight 1: no partial reservations */
#define LFREE  1   /* in the pool (core.available) */
#define LHELD  2   /* HELD: only inside a section (pass_loose, release_locked) */
#define LRES   3   /* reserved for (granted to) slot lslot */
#define LLOOSE 4   /* freed lock-free, named by lane[lpr] */
#define LFAST  5   /* HELD_FAST by process lpr */
/* slot words */
#define SFREE  1
#define SWAIT  2
#define SGRANT 3
/* core.gate, as far as this model goes (no shutdown, shrink, rate) */
#define GQUEUED 1  /* kGateQueued: the hand-off, or FIFO */
#define GBARGE  2  /* kGateBarge */

/* ---- shared segment ---------------------------------------------------- */
byte lst[N] = LFREE;
byte lpr[N];            /* word_proc (LOOSE, HELD_FAST) */
byte lslot[N] = NONE;   /* rec.slot (RESERVED) */
byte lane[NP + 1] = NONE;  /* procs[p].lanes[0].loose */
byte avail = N;         /* core.available */
byte sword[NP + 1] = SFREE;  /* slot p's word */
byte slease[NP + 1] = NONE;  /* slot p's lease (GRANTED) */
byte q[NP] = NONE;      /* the queue, head first (core.head = q[0]) */
byte qlen;              /* core.waiting */
bool hand_off;          /* core.hand_off */
byte gate;              /* core.gate: 0, GQUEUED or GBARGE */
bool nudged[NP + 1];    /* slots[p].nudge changed since p last read it
                         * (all the waiter compares it with: its read) */
bool sleeping[NP + 1];  /* slots[p].sleeping */
bool infutex[NP + 1];   /* model: p is in futex_wait on its nudge (kernel) */

/* ---- the world --------------------------------------------------------- */
bool past[NP + 1];      /* p's bound has passed (this wait) */
byte finished;

/* ---- ghosts ------------------------------------------------------------- */
byte tok[NP + 1] = NONE;  /* the lease p believes it holds */
byte owe[N];            /* the releaser whose CAS made l LOOSE and that has
                         * not yet read the gate after it (or finished
                         * hand_loose()); 0 once it has */
byte epi[NP + 1];       /* wait episodes of slot p (counts its enqueues) */
byte wh[NP + 1] = NONE; /* property 4: the head past its bound when p's
                         * locked acquire started with the hand-off on */
byte we[NP + 1];        /*   and that head's episode then */

/* scratch of the atomic sections: 0 (or NONE) between steps */
byte i, l2, h2, on2, got2;

#define HEAD (qlen > 0 -> q[0] : NONE)
#define WANTS (hand_off && qlen > 0)  /* wants_permit(): weight 1, so a
                                       * WAITING head is never full */
#define GATE_OF (qlen > 0 -> (hand_off -> GQUEUED : GBARGE) : 0)

/* ---- sections (one atomic step each) ------------------------------------ */

inline unlink_head() {
	q[0] = q[1]; q[1] = q[2]; q[2] = NONE;
	qlen--
}

inline to_pool(l) {
	lst[l] = LFREE; lpr[l] = 0; lslot[l] = NONE;
	avail++
}

/* place() for a HELD lease l: the head's reservation (hand-off: weight 1,
 * so a grant) or the pool (no head, or barging: the head is nudged) */
inline place(l) {
	if
	:: qlen > 0 && hand_off ->
		h2 = q[0];
		lst[l] = LRES; lslot[l] = h2; lpr[l] = 0;
		slease[h2] = l;
		unlink_head();
		sword[h2] = SGRANT;
		pend = pend | (1 << h2);
		h2 = 0
	:: qlen > 0 && !hand_off ->
		to_pool(l);
#ifndef MUT_NO_NUDGE
		pend = pend | (1 << q[0])
#endif
	:: else -> to_pool(l)
	fi
}

/* feed_head(): the pool to the head while it wants a permit */
inline feed_head() {
	i = 0;
	do
	:: i < N && WANTS && avail > 0 ->
		if
		:: lst[i] == LFREE -> avail--; lst[i] = LHELD; place(i)
		:: else
		fi;
		i++
	:: else -> break
	od;
	i = 0
}

/* policy_sync(): on2 = 1 when it has just turned the hand-off on */
inline policy_sync() {
	on2 = 0;
	if
	:: (qlen > 0 && past[q[0]]) != hand_off ->
		hand_off = !hand_off;
		if
		:: hand_off ->
			on2 = 1;
#ifndef MUT_NO_FEED
			feed_head()
#endif
		:: else
		fi
	:: else
	fi
}

/* sweep_loose(): every lane's LOOSE lease through pass_loose() */
inline sweep_loose() {
	i = 1;
	do
	:: i <= NP ->
		if
		:: WANTS && lane[i] != NONE && lst[lane[i]] == LLOOSE ->
			l2 = lane[i]; lst[l2] = LHELD; place(l2); l2 = 0
		:: else
		fi;
		i++
	:: else -> break
	od;
	i = 0
}

/* Section::sync_gate(): gate_sync(), and the sweep when it opened */
inline sync_gate() {
	if
	:: GATE_OF != gate ->
		if
		:: GATE_OF == GQUEUED ->
			gate = GQUEUED;
			sweep_loose();
			gate = GATE_OF
		:: else -> gate = GATE_OF
		fi
	:: else
	fi
}

inline enter() {
	policy_sync();
	if :: on2 -> sync_gate() :: else fi;
	on2 = 0
}

inline leave() {
	policy_sync();
	on2 = 0;
	sync_gate()
}

/* take_free(): the pool, else take_any_loose() (lanes in order) */
inline take_free(me) {
	got2 = NONE;
	i = 0;
	do
	:: i < N && lst[i] == LFREE -> got2 = i; avail--; break
	:: i < N && lst[i] != LFREE -> i++
	:: i >= N -> break
	od;
	if
	:: got2 == NONE ->
		i = 1;
		do
		:: i <= NP && lane[i] != NONE && lst[lane[i]] == LLOOSE ->
			got2 = lane[i]; break
		:: i <= NP && !(lane[i] != NONE && lst[lane[i]] == LLOOSE) -> i++
		:: i > NP -> break
		od
	:: else
	fi;
	if
	:: got2 != NONE ->
		lst[got2] = LFAST; lpr[got2] = me; lslot[got2] = NONE; owe[got2] = 0;
		tok[me] = got2
	:: else
	fi;
	i = 0
}

/* the releaser me has read the gate after its CAS of l (a later
 * releaser of the same lease may owe it now) */
#define CLR_OWE(l) if :: owe[l] == me -> owe[l] = 0 :: else fi

/* property 4 at every acquisition of me */
#define FIFO_PAST(me) assert(wh[me] == NONE || !(sword[wh[me]] == SWAIT && epi[wh[me]] == we[me]))

/* Wakes::run after the unlock: for each slot collected, nudge_slot()
 * (nudge++, then wake_slot() if it sleeps: nudge++, FUTEX_WAKE on the word
 * and on the nudge) */
inline run_wakes() {
	do
	:: pend == 0 -> break
	:: pend != 0 ->
		w = 1;
		do
		:: (pend >> w) & 1 -> break
		:: else -> w++
		od;
		pend = pend & ~(1 << w);
#ifndef MUT_NUDGE_WORD
		nudged[w] = 1;
#endif
		atomic {
			if
			:: sleeping[w] -> nudged[w] = 1; infutex[w] = 0
			:: else
			fi;
			w = 0
		}
	od
}

/* nudge_head(), from a lock-free release that read the gate BARGE: the
 * head read once without the lock, then nudge_slot() on it */
inline nudge_head() {
	w = HEAD;
	if
	:: w != NONE ->
#ifndef MUT_NUDGE_WORD
		nudged[w] = 1;
#endif
		atomic {
			if
			:: sleeping[w] -> nudged[w] = 1; infutex[w] = 0
			:: else
			fi;
			w = 0
		}
	:: else -> w = 0
	fi
}

proctype P(byte me; byte ops) {
	byte l = NONE;       /* the lease held */
	byte pend;           /* Wakes of this process's current section */
	byte w;              /* scratch of run_wakes / nudge_head */
	bool armed;          /* sleep plan computed before the bound passed */
	bool rdon;           /* ghost: hand_off when fast_acquire read the gate */
	bool done;

	do
	:: ops == 0 -> break
	:: ops > 0 ->
		ops--;
		wh[me] = NONE;
		/* ---- fast_acquire() ---- */
		l = lane[me];
		if
		:: l != NONE && lst[l] == LLOOSE && lpr[l] == me -> skip
		:: else -> l = NONE; goto locked
		fi;
		if
#ifndef MUT_FAST_ANY_GATE
		:: gate == GQUEUED -> l = NONE; goto locked
#endif
		:: else -> rdon = hand_off
		fi;
		atomic {
			if
			:: lst[l] == LLOOSE && lpr[l] == me ->
				/* property 3: a lock-free take with the hand-off on
				 * only by a newcomer that read the gate before it
				 * turned on */
				assert(!(hand_off && qlen > 0) || !rdon);
				lst[l] = LFAST; owe[l] = 0; tok[me] = l;
				rdon = 0;
				goto hold
			:: else -> l = NONE; rdon = 0
			fi
		}
locked:
		/* ---- waiter_start(): take_at_once() or enqueue() ---- */
		atomic {
			enter();
			if
			:: hand_off && qlen > 0 -> wh[me] = q[0]; we[me] = epi[q[0]]
			:: else
			fi;
#ifdef MUT_LOCKED_BARGE
			if
			:: true ->
#else
			if
			:: qlen == 0 || !hand_off ->
#endif
				take_free(me);
				if
				:: got2 != NONE ->
					/* property 3: no locked take past a queue
					 * with the hand-off on */
					assert(!(hand_off && qlen > 0));
					FIFO_PAST(me);
					l = got2; got2 = 0
				:: else -> got2 = 0
				fi
			:: else
			fi;
			if
			:: l == NONE ->
				sword[me] = SWAIT; epi[me]++; past[me] = 0;
				q[qlen] = me; qlen++
			:: else
			fi;
			leave()
		};
		run_wakes();
		if :: l != NONE -> goto hold :: else fi;
		/* ---- wait_turns() ---- */
turn:
#ifndef MUT_READ_LATE
		nudged[me] = 0;
#endif
		/* waiter_poll(): without the lock, a WAITING slot that is not
		 * the head within a barging queue sleeps again */
		if
		:: sword[me] == SWAIT && !(qlen > 0 && q[0] == me && !hand_off) -> goto sleep
		:: else
		fi;
		/* complete() */
		atomic {
			enter();
			done = 0;
			if
			:: sword[me] == SGRANT ->
				/* finish_slot() */
				l = slease[me];
				assert(lst[l] == LRES && lslot[l] == me);
				lst[l] = LFAST; lpr[l] = me; lslot[l] = NONE; tok[me] = l;
				sword[me] = SFREE; slease[me] = NONE; past[me] = 0;
				done = 1
			:: sword[me] == SWAIT && !hand_off ->
				/* head_takes(): no reservation to drop (weight 1) */
				if
				:: q[0] == me ->
					take_free(me);
					if
					:: got2 != NONE ->
						l = got2; got2 = 0;
						unlink_head();
						sword[me] = SFREE; past[me] = 0;
						done = 1
					:: else -> got2 = 0
					fi
				:: else
				fi
			:: else  /* hand-off, not granted yet: grant_due_head() false */
			fi;
			if
			:: done -> FIFO_PAST(me)
			:: else
			fi;
			leave()
		};
		run_wakes();
		if :: done -> done = 0; goto hold :: else fi;
sleep:
		/* sleep_once(): the plan (wake_by), `sleeping`, the recheck of the
		 * word, futex_wait(nudge, v) */
#ifdef MUT_READ_LATE
		/* the nudge read after the poll, with the sleep's plan */
		atomic { armed = !past[me]; sleeping[me] = 1; nudged[me] = 0 };
#else
		atomic { armed = !past[me]; sleeping[me] = 1 };
#endif
		if
		:: sword[me] != SWAIT -> sleeping[me] = 0; goto turn
		:: else
		fi;
		atomic {
			if
			:: nudged[me] -> sleeping[me] = 0; goto turn
			:: else -> infutex[me] = 1
			fi
		};
		/* woken: a FUTEX_WAKE on the nudge, or the bound's timer */
		atomic {
			if
			:: !infutex[me] -> skip
			:: armed && past[me] -> infutex[me] = 0
			fi;
			sleeping[me] = 0; armed = 0; nudged[me] = 0
		};
		goto turn;
hold:
		assert(tok[me] == l && lst[l] == LFAST && lpr[l] == me);
		/* ---- release ---- */
		/* fast_release(): the gate first */
		if
		:: gate == GQUEUED -> goto rlocked
		:: else
		fi;
		/* the lane's other LOOSE lease -> the locked path */
		if
		:: lane[me] != NONE && lane[me] != l && lst[lane[me]] == LLOOSE -> goto rlocked
		:: else
		fi;
		lane[me] = l;
		atomic {
			assert(lst[l] == LFAST && lpr[l] == me);
			lst[l] = LLOOSE; owe[l] = me; tok[me] = NONE
		};
		/* after fence_after_rmw(): the gate (the ghost cleared with the
		 * read, in one step) */
		if
		:: gate == GQUEUED ->
			/* hand_loose() */
			atomic {
				enter();
				if
				:: WANTS && lst[l] == LLOOSE ->
					lst[l] = LHELD; place(l)
				:: else
				fi;
				CLR_OWE(l);
				leave()
			};
			run_wakes()
		:: atomic { gate == GBARGE -> CLR_OWE(l) }; nudge_head()
		:: atomic { gate == 0 -> CLR_OWE(l) }
		fi;
		l = NONE;
		goto next;
rlocked:
		/* release_locked(): HELD_FAST -> HELD, place() */
		atomic {
			enter();
			assert(lst[l] == LFAST && lpr[l] == me);
			tok[me] = NONE;
			lst[l] = LHELD;
			place(l);
			leave()
		};
		run_wakes();
		l = NONE;
next:
		skip
	od;
	finished++
}

/* The clock: a waiter's bound passes, once per wait, at any moment. */
proctype Clock() {
end:
	do
	:: atomic { sword[1] == SWAIT && !past[1] -> past[1] = 1 }
	:: atomic { sword[2] == SWAIT && !past[2] -> past[2] = 1 }
	:: atomic { sword[3] == SWAIT && !past[3] -> past[3] = 1 }
	od
}

/* The invariant, between any two steps: a process that only becomes
 * runnable when it fails (no states of its own). */
#define IMP(a, b) (!(a) || (b))
#define LINV(x) ( \
	IMP(lst[x] == LFREE, lslot[x] == NONE) && \
	lst[x] != LHELD && \
	IMP(lst[x] == LRES, lslot[x] != NONE && sword[lslot[x]] == SGRANT && slease[lslot[x]] == x) && \
	IMP(lst[x] == LLOOSE, lane[lpr[x]] == x) && \
	IMP(lst[x] == LFAST, tok[lpr[x]] == x) && \
	IMP(hand_off && qlen > 0, lst[x] != LFREE && IMP(lst[x] == LLOOSE, owe[x] != 0)))
#if N == 1
#define NFREE ((lst[0] == LFREE))
#define LALL (LINV(0))
#else
#define NFREE ((lst[0] == LFREE) + (lst[1] == LFREE))
#define LALL (LINV(0) && LINV(1))
#endif
#define SINV(p) ( \
	IMP(sword[p] == SWAIT, q[0] == p || q[1] == p || q[2] == p) && \
	IMP(sword[p] == SGRANT, slease[p] != NONE) )
#define INV ( \
	avail == NFREE && LALL && SINV(1) && SINV(2) && SINV(3) && \
	gate == GATE_OF )

proctype Monitor() {
end:
	atomic { !INV -> assert(INV) }
}

/* All done: every permit in the pool or LOOSE in a lane, nobody queued. */
proctype Final() {
	(finished == NP);
	assert(qlen == 0 && !hand_off && gate == 0 && avail == NFREE);
	assert(lst[0] == LFREE || lst[0] == LLOOSE);
#if N == 2
	assert(lst[1] == LFREE || lst[1] == LLOOSE);
#endif
}

init {
	atomic {
		run Monitor();
		run Final();
#ifndef NOBOUND
		run Clock();
#endif
		run P(1, OPS1);
		run P(2, OPS);
		run P(3, OPS)
	}
}
