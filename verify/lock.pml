/*
 * lock.pml -- a SPIN model of the segment lock itself (libshmsem/src/lock.cc,
 * docs/DESIGN.md section 2), step by step: the lock word, the CAS acquire,
 * the waiters flag, the futex sleep with a timeout, the holder naming itself
 * in lock_owner, the takeover of a dead holder and repair, the release.
 * verify/shmsem.pml abstracts this lock as `atomic` blocks; this model
 * checks that abstraction. What each step stands for, what is abstracted
 * and the results: verify/MODEL.md, "The lock model". Run: verify/run.sh.
 * The commit and layout version the models match: verify/MODEL.md, "What
 * the models match".
 *
 * Every statement below is one atomic step of the C code (a load, a CAS, a
 * store, a system call); where an `atomic` block joins a load to the CAS or
 * store after it, MODEL.md says why no run is lost.
 *
 * Build-time parameters (spin -D...):
 *   NT        threads (1 to 3), one per process; thread t has tid t
 *   CYCLES    lock/unlock cycles per thread      CYCLES1  cycles of thread 1
 *   MAXCRASH  threads killed per run, at any step
 *   MAXLOST   sleepers that a read-only process moves to another futex
 *             (FUTEX_CMP_REQUEUE): no FUTEX_WAKE of the word reaches them
 *   RECYCLE   threads whose tid a new thread gets after they end
 *   CORRUPT   a critical section may stop half-way (mark_corrupt());
 *             unlock() repairs
 *   SLOWWRAP  with RECYCLE: no tid is reused while a waiter is between
 *             reading lock_owner and its takeover CAS (the PID space does
 *             not wrap around inside one judgement: rules out F3; F5, a
 *             reuse before the judgement, is ruled out by the bare-tid
 *             verdict, MODEL.md)
 *   LTL_LIVE  the liveness claim (pan -a -f); verdicts are then exact
 * Mutations (each takes out one part of lock.cc's repair of F1, F2, F4 and
 * brings that finding back; MODEL.md):
 *   NO_SEQ_CHECK  holder_dead() uses a copy of lock_owner even if lock_seq
 *                 moved or was odd (F1)
 *   NO_TID_CLEAR  unlock() leaves lock_owner.tid naming the last holder (F2)
 *   NO_OWN_TID    lock_slow() does not take over from its own tid (F4)
 *   NO_TAKEOVER_BIT  a takeover does not flip kLockTakeover: the word is
 *                 tid | WAITERS after it, as before 41e63ee (F5)
 *   RECORD_FIRST  holder_dead() judges the record (when whole and naming the
 *                 word's tid) before the bare tid, as before d625ad2; also
 *                 what lock.cc falls back to without PIDFD_THREAD (F5)
 */

#ifndef NT
#define NT 2
#endif
#ifndef CYCLES
#define CYCLES 1
#endif
#ifndef CYCLES1
#define CYCLES1 CYCLES
#endif
#ifndef MAXCRASH
#define MAXCRASH 1
#endif
#ifndef MAXLOST
#define MAXLOST 0
#endif
#ifndef RECYCLE
#define RECYCLE 0
#endif

#define WAITERS 8        /* kLockWaiters (layout.h) */
#define TAKEOVER 16      /* kLockTakeover: flipped by every takeover */
#define TIDMASK 7        /* kLockTidMask */

/* ---- shared memory ---------------------------------------------------------- */
byte word;          /* core.lock_word: 0, tid, or tid + WAITERS, plus
                     * TAKEOVER after an odd number of takeovers in a row */
byte rec_seq;       /* core.lock_seq: odd while lock_owner is being rewritten */
byte rec_tid;       /* core.lock_owner.tid: stored after the identity fields,
                     * cleared by unlock() (0: names nobody) */
byte rec_id;        /* core.lock_owner.{pid,start,ino,tino}: the identity of
                     * the thread that stored them (0: never stored) */
bool dirty;         /* the state the lock protects is half-changed */

/* ---- the kernel ----------------------------------------------------------- */
byte fx[NT + 1];    /* thread t in FUTEX_WAIT: 0 no, 1 on the lock word's
                     * queue, 2 requeued to another futex */
byte cur[NT + 1];   /* cur[tid]: identity of the live thread with that tid,
                     * 0 if none (pidfd_open(tid, PIDFD_THREAD) -> ESRCH) */
byte deadmask;      /* bit i: the thread of identity i died or exited */

/* ---- the world -------------------------------------------------------------- */
byte budget;        /* kills left */
byte lost;          /* requeues done by the read-only process */
byte recycles;      /* tid reuses left */
byte finished;      /* threads that ended (done or dead) */

/* ---- ghosts (model only) -------------------------------------------------- */
byte gholder;       /* identity whose CAS made the current non-zero word */
byte incs;          /* bit i: live identity i holds the lock (CAS .. exchange) */
#ifdef SLOWWRAP
byte judging;       /* bit t: thread t is between reading lock_owner and its
                     * takeover CAS (or giving up); no tid is reused meanwhile */
#define JUDGING(b)  judging = (b -> judging | (1 << t) : judging & ~(1 << t))
#define WRAP_OK     (judging == 0)
#else
#define JUDGING(b)  skip
#define WRAP_OK     true
#endif

#define DEAD(i)   (((deadmask >> (i)) & 1) == 1)

/* A kill point (SIGKILL, or the process exits): the first thing in every
 * step that changes shared memory or the futex queue. A kill before a step
 * that only reads is the same as a kill before the next write (MODEL.md).
 * The kernel dequeues a dead sleeper; the lock word keeps its tid. */
#define KILL \
	if \
	:: budget > 0 -> \
		budget--; \
		deadmask = deadmask | (1 << id); cur[t] = 0; fx[t] = 0; \
		incs = incs & ~(1 << id); \
		v = 0; otid = 0; oid = 0; gh = 0; seq = 0; JUDGING(false); \
		taken = false; corrupt = false; dv = false; \
		goto die \
	:: true \
	fi

/* lock_slow(): the word names the caller's own tid */
#ifndef NO_OWN_TID
#define OWN_TID(x)  ((x) != 0 && ((x) & TIDMASK) == t)
#else
#define OWN_TID(x)  false
#endif

/* read_lock_owner() returns false: lock_seq was odd or moved during the copy */
#ifndef NO_SEQ_CHECK
#define TORN        (rec_seq != seq || (seq & 1) == 1)
#else
#define TORN        false
#endif

/* lock.cc taken_over(): the word after thread t takes over from x. Never x,
 * even when t is the dead holder's reused tid. Ordinary acquisitions (from
 * 0) never set TAKEOVER. */
#ifndef NO_TAKEOVER_BIT
#define TAKEN_OVER_WORD(x)  (t | WAITERS | (((x) & TAKEOVER) ^ TAKEOVER))
#else
#define TAKEN_OVER_WORD(x)  (t | WAITERS)
#endif

/* FIX_TAG (a proposal, not in lock.cc): the holder stores its tid together
 * with the word's TAKEOVER bit in lock_owner.tid, and holder_dead() uses the
 * record only if both match the word; a record left by a dead holder with
 * the same tid then does not describe the thread that took over from it. */
#ifdef FIX_TAG
#define RECTID   (t | (word & TAKEOVER))
#define RECMASK  (TIDMASK | TAKEOVER)
#else
#define RECTID   t
#define RECMASK  TIDMASK
#endif

/* The lock becomes ours by a CAS from 0: nobody held it. */
#define ACQUIRED \
	assert(gholder == 0 && incs == 0); \
	gholder = id; incs = 1 << id

/* The lock becomes ours by the takeover CAS: the holder it replaces must be
 * dead (a takeover never happens while the named holder lives). */
#define TAKEN_OVER \
	assert(gholder != 0 && DEAD(gholder)); \
	gholder = id; incs = 1 << id; taken = true

/* FUTEX_WAKE(&word, 1): wakes one thread on the word's queue, if any. */
#if NT == 1
#define FUTEX_WAKE \
	if \
	:: fx[1] == 1 -> fx[1] = 0 \
	:: else \
	fi
#elif NT == 2
#define FUTEX_WAKE \
	if \
	:: fx[1] == 1 -> fx[1] = 0 \
	:: fx[2] == 1 -> fx[2] = 0 \
	:: else \
	fi
#elif NT == 3
#define FUTEX_WAKE \
	if \
	:: fx[1] == 1 -> fx[1] = 0 \
	:: fx[2] == 1 -> fx[2] = 0 \
	:: fx[3] == 1 -> fx[3] = 0 \
	:: else \
	fi
#else
#error "NT must be 1, 2 or 3"
#endif

proctype T(byte t) {
	byte id = t;        /* this thread's identity (pid, start, pidfs inodes) */
	byte cyc;           /* cycles done */
	byte v;             /* the word value lock_slow() works with */
	byte otid, oid;     /* holder_dead(): the copy of lock_owner */
	byte gh;            /* ghost: the holder when holder_dead() saw the word */
	byte seq;           /* read_lock_owner(): lock_seq before the copy */
	bool taken;         /* lock(): dead_holder */
	bool corrupt;       /* s->corrupt (private to the handle) */
	bool dv;            /* holder_dead()'s answer */

start:
	do
	:: cyc < (t == 1 -> CYCLES1 : CYCLES) ->
		/* ---- lock(): CAS 0 -> tid ---- */
		atomic {
			cyc++;
			KILL;
			if
			:: word == 0 -> word = t; ACQUIRED; goto locked
			:: else
			fi
		};
		/* ---- lock_slow(): the spin is more CASes 0 -> tid (MODEL.md) ---- */
loop:
		/* v = word.load(), then one CAS from v (a CAS from a stale v fails
		 * and loops: the same as loading later) */
		atomic {
			v = word;
			if
#ifndef NO_OWN_TID
			:: OWN_TID(v) ->
				/* our own tid, and we do not hold the lock: an earlier
				 * thread with this tid died holding it. SHMSEM_HOOK(
				 * LOCK_TAKEOVER); CAS v -> taken_over(v, tid) */
				KILL; word = TAKEN_OVER_WORD(v); v = 0; TAKEN_OVER;
				goto locked
#endif
			:: v == 0 ->
				/* others may still sleep: keep the flag (mutex 3) */
				KILL; word = t | WAITERS; ACQUIRED; goto locked
			:: v != 0 && (v & WAITERS) == 0 && !OWN_TID(v) ->
				KILL; word = v | WAITERS; v = v | WAITERS
			:: else
			fi
		};
		/* futex_wait(&word, v, check_at): the kernel compares and queues in
		 * one step. The sleep ends by a FUTEX_WAKE or by the timeout (a
		 * spurious return or -EINTR is the same to the caller); a sleeper
		 * requeued away can only time out. Then if (now < check_at)
		 * continue: a return before the timeout (-EAGAIN, a wake) may come
		 * before check_at ("early") or after it ("late"). */
		atomic {
			if
			:: word == v -> fx[t] = 1
			:: word != v -> v = 0; goto loop         /* -EAGAIN, early */
			:: word != v -> goto check               /* -EAGAIN, late */
			fi
		};
		if
		:: atomic { fx[t] == 0 -> v = 0; goto loop } /* FUTEX_WAKE, early */
		:: fx[t] == 0                                /* FUTEX_WAKE, late */
		:: atomic { fx[t] != 0 -> fx[t] = 0 }        /* the timeout */
		fi;
check:
		/* if (word.load(acquire) == v) */
		if
		:: word != v -> v = 0; goto loop
		:: else
		fi;
		/* holder_dead(v): read_lock_owner(): lock_seq, the tid, the four
		 * identity fields, lock_seq again */
		atomic { seq = rec_seq; JUDGING(true) };
		otid = rec_tid;
		oid = rec_id;
		atomic {
			/* the copy is whole if lock_seq was even and did not move, and
			 * it describes the holder of v only if it names v's tid: else
			 * judge the bare tid (o = Owner{}; o.tid = tid) */
			if
			:: TORN || otid != (v & RECMASK) -> otid = v & TIDMASK; oid = 0
			:: else -> otid = otid & TIDMASK
			fi;
			seq = 0
		};
		/* the word re-check (early exit) */
		atomic {
			if
			:: word != v -> otid = 0; oid = 0; v = 0; JUDGING(false); goto loop
			:: else -> gh = gholder
			fi
		};
		/* the verdict, a later step (system calls): the holder seen at the
		 * re-check may have unlocked and exited meanwhile (and with its tid
		 * reused, relocked: F3) */
		atomic {
#ifndef RECORD_FIRST
			/* tid_verdict(tid), the bare tid of the word first: dead iff no
			 * live thread has it (ESRCH, or a zombie leader); alive if any
			 * thread has it, whoever it is (a reuser included). The record
			 * copied above is used only when the kernel cannot tell (no
			 * PIDFD_THREAD): not modelled, the kernel here has it. */
			dv = (cur[v & TIDMASK] == 0);
#else
			/* the record path, as before d625ad2 (and lock.cc's fallback
			 * without PIDFD_THREAD): thread_verdict(o), then
			 * process_verdict(o) if o.pid: dead if no thread has the tid
			 * (ESRCH) or the one that has it is not the recorded one
			 * (pidfs inodes differ); one thread per process, so the
			 * process verdict says the same */
			dv = (cur[otid] == 0 || (oid != 0 && cur[otid] != oid));
#endif
			/* dead must be proven: a live holder is never judged dead */
			assert(!dv || DEAD(gh));
#if RECYCLE == 0
			/* and a dead holder is judged dead (a recycled tid may hide
			 * it: MODEL.md) */
			assert(dv || !DEAD(gh));
#endif
			otid = 0; oid = 0; gh = 0;
#ifndef LTL_LIVE
			/* unknown (no PIDFD_THREAD, hidepid, no may_judge()): alive */
			if
			:: dv = false
			:: true
			fi;
#endif
			if
			:: !dv -> JUDGING(false)
			:: else
			fi
		};
		if
		:: dv ->
			/* SHMSEM_HOOK(LOCK_TAKEOVER); CAS v -> taken_over(v, tid) */
			atomic {
				dv = false;
				KILL;
				JUDGING(false);
				if
				:: word == v ->
					word = TAKEN_OVER_WORD(v); v = 0; TAKEN_OVER; goto locked
				:: else
				fi
			}
		:: else
		fi;
		v = 0;
		goto loop;

locked:
		/* SHMSEM_HOOK(LOCK_TAKEN); name_holder(): the four identity loads
		 * and the first store are one step (only the holder writes the
		 * record) */
		atomic {
			if
			:: rec_id == id && (rec_seq & 1) == 0 ->
				/* the record is ours already and lock_seq is even: store
				 * the tid (release). An odd count (a writer died
				 * mid-write) takes the rewrite below, which makes it even
				 * again. */
				KILL; rec_tid = RECTID; goto named
			:: else
			fi;
			KILL;
			rec_seq = rec_seq | 1     /* seqlock writer: odd (stays odd if a
			                           * writer died mid-write), release fence */
		};
		atomic { KILL; rec_id = id };     /* pid, start, ino, tino */
		atomic { KILL; rec_tid = RECTID };
		atomic { KILL; rec_seq++ };       /* even again (release) */
named:
		/* s->corrupt = false; if (dead_holder) repair(s) */
		if
		:: taken -> atomic { taken = false; KILL; dirty = false }
		:: else
		fi;

		/* ---- the critical section ---- */
		atomic {
			/* mutual exclusion: no other live thread holds the lock */
			assert(incs == (1 << id));
			/* no section sees what a dead holder left half-done */
			assert(!dirty);
			KILL;
			dirty = true              /* its first store */
		};
		atomic {
			KILL;
			if
			:: dirty = false          /* its last store: consistent again */
#ifdef CORRUPT
			:: corrupt = true         /* a value read was out of range: the
			                           * section stopped, mark_corrupt() */
#endif
			fi
		};

		/* ---- unlock() ---- */
		if
		:: corrupt -> atomic { corrupt = false; KILL; dirty = false }  /* repair() */
		:: else
		fi;
#ifndef NO_TID_CLEAR
		atomic { KILL; rec_tid = 0 }  /* the record names nobody now */
#endif
		atomic {                      /* exchange(0) */
			KILL;
			v = word; word = 0;
			assert(gholder == id);
			gholder = 0; incs = 0
		};
		if
		:: (v & WAITERS) != 0 -> atomic { v = 0; KILL; FUTEX_WAKE }
		:: else -> v = 0
		fi
	:: else -> break
	od;
	/* the thread exits: its tid names nobody now */
	atomic { deadmask = deadmask | (1 << id); cur[t] = 0 };
die:
#if RECYCLE > 0
	/* a new thread gets this tid (the PID space wrapped) and runs a cycle */
	if
	:: atomic { recycles > 0 && id == t && WRAP_OK ->
	            recycles--; id = t + NT; cur[t] = id;
	            cyc = (t == 1 -> CYCLES1 : CYCLES) - 1 };
	   goto start
	:: true
	fi;
#endif
	finished++
}

#if MAXLOST > 0
/* A process with read access only: FUTEX_CMP_REQUEUE moves a sleeper from the
 * lock word to another futex, where no FUTEX_WAKE of the word reaches it. */
active proctype ReadOnly() {
end:
	do
	:: atomic { lost < MAXLOST && fx[1] == 1 -> fx[1] = 2; lost++ }
#if NT >= 2
	:: atomic { lost < MAXLOST && fx[2] == 1 -> fx[2] = 2; lost++ }
#endif
#if NT == 3
	:: atomic { lost < MAXLOST && fx[3] == 1 -> fx[3] = 2; lost++ }
#endif
	od
}
#endif

init {
	byte k;
	atomic {
		budget = MAXCRASH;
		recycles = RECYCLE;
		k = 1;
		do
		:: k <= NT -> cur[k] = k; run T(k); k++
		:: else -> break
		od;
		k = 0
	}
}

#ifdef LTL_LIVE
/* Under weak fairness (every live thread keeps taking steps; a stopped
 * holder is a thread that takes none, which only the safety runs cover),
 * every thread gets the lock for all its cycles or dies: nobody waits
 * forever behind a dead holder, whatever wakes are lost. */
ltl live { <> (finished == NT) }
#endif
