/*
 * redis.pml -- a SPIN model of shmsem's Redis backend (docs/DESIGN.md
 * section 16): the server's functions (libshmsem/src/redis/shmsem.lua),
 * each one atomic step, as Redis runs an FCALL whole; the clients' side
 * (libshmsem/src/redis/acquire.cc, keepalive.cc): acquire, the wait loop
 * of BLPOPs on the waiter's own mailbox with wait_renew between them, the
 * deadline and the cancel handle (shmsem_cancel), the keep-alive, release.
 *
 * What each part stands for, what is abstracted and why, and what is
 * checked: verify/MODEL.md, "The Redis model". Run: verify/run.sh --only
 * 'r-*'.
 *
 * Shape. NC = 3 clients share N permits (max_permits; 1 or 2). Client c
 * asks for WTc permits, OPS times (client 1: OPS1), and releases what it
 * gets. A client may be killed at any step (MAXKILL per run), and a reply
 * may be lost on its connection after the server ran the call (MAXLOST per
 * run): a popped BLPOP message is then gone for good. init plays the
 * operator: a shutdown (SHUTDOWN), a resize to RESIZE and back (RESIZE),
 * at any moment of the clients' runs.
 *
 * Time. There is no number for it. `Clock` makes a lease's expiry pass
 * (`lx`) when nobody keeps it alive: its owner is dead, or does not know
 * it holds it (a lost reply or message); a ticket's keep-alive pass (`wx`)
 * when its waiter is dead or no longer in its wait loop; and a waiter's
 * deadline pass (`due`). MAXPAUSE leases of live holders may expire too (a
 * holder paused past its TTL), and MAXLAPSE tickets of live waiters (a
 * waiter cut off from the server past its keep-alive). As on the server,
 * an expiry takes effect at the next function anyone calls (reap, first
 * in every function). Under weak fairness (the ltl runs) the clock moves
 * whenever something can expire: every deadline passes, every lease and
 * ticket nobody keeps alive expires.
 *
 * Build-time parameters (spin -D...):
 *   N          permits (1 or 2)            OPS, OPS1  acquires per client
 *   WT1 WT2 WT3  weights asked (default 1)
 *   TIMED      bit c: client c waits with a deadline (default 0)
 *   CANCELS    bit c: client c's cancel handle may fire (default 0)
 *   MAXKILL MAXLOST MAXPAUSE MAXLAPSE  budgets per run (default 0)
 *   SHUTDOWN   a process shuts the pool down once, at any moment
 *   RESIZE     a process sets permits to RESIZE, then back to N
 *   RENEW      a holder may call shmsem_lease_renew before its release
 *   DOUBLE_RELEASE  every release is followed by a second one
 *   BUG_R1     keep_place() as before the R1 fix: "done" from wait_renew
 *              only loops back to the next BLPOP (MODEL.md, Findings)
 *   LTL_TERMINATES  the liveness claim (pan -a -f): every client ends
 *   COVER=n    fail where coverage probe n is reached (MODEL.md)
 *   MUT_SKIP_HEAD, MUT_BARGE, MUT_NO_GEN, MUT_NO_BUMP, MUT_CANCEL_DROP,
 *   MUT_NO_LOST, MUT_NO_PUMP, MUT_RENEW_NO_REAP  mutations that must make the model fail
 *              (MODEL.md)
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
#ifndef WT1
#define WT1 1
#endif
#ifndef WT2
#define WT2 1
#endif
#ifndef WT3
#define WT3 1
#endif
#ifndef TIMED
#define TIMED 0
#endif
#ifndef CANCELS
#define CANCELS 0
#endif
#ifndef MAXKILL
#define MAXKILL 0
#endif
#ifndef MAXLOST
#define MAXLOST 0
#endif
#ifndef MAXPAUSE
#define MAXPAUSE 0
#endif
#ifndef MAXLAPSE
#define MAXLAPSE 0
#endif
#ifndef COVER
#define COVER 0
#endif
/* coverage probe n: with -DCOVER=n the run must fail there (MODEL.md) */
#define PROBE(n) if :: COVER == n -> assert(false) :: else fi

#define NC 3
#define NI 2          /* array size for indices (N <= 2) */
#define GMAX 8        /* generations of an index the ghosts can name */
#define NONE 255

/* a mailbox: empty, "G idx gen seq n", "S", "X" */
#define MNONE 0
#define MG 1
#define MS 2
#define MX 3

/* the life of lease (i, g), a ghost: lstat[i * GMAX + g] */
#define LNEVER 0
#define LHELD 1
#define LREL 2      /* released */
#define LEXP 3      /* reaped: its expiry passed */

/* reply words, as the client sees them */
#define R_OK 1      /* granted, ok, held */
#define R_QUEUED 2
#define R_SHUT 3
#define R_EXP 4     /* expired */
#define R_ALREADY 5
#define R_LEFT 6    /* timedout or canceled: left owning nothing */
#define R_DONE 7    /* wait_renew: not queued */
#define R_LOST 8    /* no reply (-ECOMM): the call ran, its answer is lost */
#define R_NIL 9     /* BLPOP timed out */
#define R_X 10      /* message X: reaped (-ECOMM) */

#define WTOF(c) (c == 1 -> WT1 : (c == 2 -> WT2 : WT3))
#define OPSOF(c) (c == 1 -> OPS1 : OPS)
#define TIMEDOF(c) ((TIMED >> c) & 1)
#define CANCELOF(c) ((CANCELS >> c) & 1)

/* ---- the server: the pool's keys -------------------------------------- */
byte permits = N;       /* base.permits */
byte held;              /* base.held */
bool closed;            /* base.closed */
byte ticket;            /* base.ticket */
byte freem;             /* :free, a bit per index */
byte gen[NI];           /* :gen */
byte lgen[NI];          /* :l, by first index: generation (0: no record) */
byte ln[NI];            /*   its weight */
byte lmask[NI];         /*   its indices */
byte lown[NI];          /*   the client it was granted to (model only) */
bool lx[NI];            /* :lexp, the expiry has passed */
byte lostm[NI];         /* :lost, bit g: "i:g" expired */
byte q[NC];             /* :q, clients in ticket order */
byte qlen;
byte wn[NC + 1];        /* :wn, client c's weight while queued (0: not) */
bool wx[NC + 1];        /* :wexp, c's keep-alive has passed */
byte mb[NC + 1];        /* :mb:T, c's current ticket's mailbox */
byte mbi[NC + 1];
byte mbg[NC + 1];

/* ---- the clients' memory ------------------------------------------------ */
bool chold[NC + 1];     /* c holds a lease (its keep-alive renews it) */
byte cidx[NC + 1];      /* the lease c believes it has (NONE: none) */
byte cgen[NC + 1];
bool cwait[NC + 1];     /* c is in its wait loop (renews its ticket) */
bool due[NC + 1];       /* c's deadline has passed */
bool dead[NC + 1];

/* ---- budgets, ghosts ----------------------------------------------------- */
byte kills, losts, pauses, lapses, finished;
byte lstat[NI * GMAX];  /* the life of each lease (LNEVER ...) */
byte tk[NC + 1];        /* c's ticket (FIFO order) */
bool gw[NC + 1];        /* c's current wait was granted (pump posted G) */
byte ggi[NC + 1];       /*   the lease posted */
byte ggg[NC + 1];
bool glost[NC + 1];     /*   and that G was lost (popped or taken, its reply lost) */

/* registers of one step: 0 between steps */
byte rep, ri, rg, sc, si, sj, sk, sm, sx;

#define AVAIL (permits > held -> permits - held : 0)
/* lease at first index i is kept alive: its owner lives and holds it, or
 * waits with its grant in the mailbox */
#define KEPT(i) (!dead[lown[i]] && \
	((chold[lown[i]] && cidx[lown[i]] == i && cgen[lown[i]] == lgen[i]) || \
	 (cwait[lown[i]] && mb[lown[i]] == MG && mbi[lown[i]] == i)))
#define WKEPT(c) (!dead[c] && cwait[c])

/* ---- invariants (shmsem_check and more), after every function ---------- */
inline check_inv() {
	sk = 0; sm = 0; si = 0;
	do
	:: si < N ->
		if :: freem & (1 << si) -> sk++ :: else fi;
		if
		:: lgen[si] != 0 ->
			sm = sm + ln[si];
			assert(gen[si] == lgen[si]);       /* an index's gen is its lease's */
			assert((lmask[si] & freem) == 0)
		:: else
		fi;
		si++
	:: else -> break
	od;
	assert(sk + sm == N);                         /* REDIS-INDICES */
	assert(held == sm);                           /* REDIS-HELD */
	/* at most N permits held by live holders of current leases */
	sm = 0; si = 1;
	do
	:: si <= NC ->
		if
		:: !dead[si] && chold[si] && lstat[cidx[si] * GMAX + cgen[si]] == LHELD ->
			sm = sm + WTOF(si)
		:: else
		fi;
		si++
	:: else -> break
	od;
	assert(sm <= N);
	/* pump ran to its end: a head that can be served is served in the
	 * same step (weighted head-of-line stops at the first that cannot) */
	assert(closed || qlen == 0 || AVAIL < wn[q[0]]);
	sk = 0; sm = 0; si = 0
}

/* ---- the functions' parts ----------------------------------------------- */

/* grant(): the n lowest free indices, each index's generation bumped. */
inline grant(who, n) {
	sk = 0; si = 0; sm = 0;
	do
	:: sk < n && si < N ->
		if
		:: freem & (1 << si) ->
			freem = freem & ~(1 << si);
			sm = sm | (1 << si);
			if :: sk == 0 -> ri = si :: else fi;
#ifdef MUT_NO_BUMP
			if :: gen[si] == 0 -> gen[si]++ :: else fi;
#else
			gen[si]++;
#endif
			sk++
		:: else
		fi;
		si++
	:: else -> break
	od;
	assert(sk == n);
	rg = gen[ri];
	assert(rg < GMAX);
	/* never two holders of one lease: (ri, rg) is new */
	assert(lstat[ri * GMAX + rg] == LNEVER);
	/* fencing: above every generation a client still has for the index */
	si = 1;
	do
	:: si <= NC -> assert(dead[si] || cidx[si] != ri || cgen[si] < rg); si++
	:: else -> break
	od;
	lgen[ri] = rg; ln[ri] = n; lmask[ri] = sm; lown[ri] = who; lx[ri] = 0;
	held = held + n;
	lstat[ri * GMAX + rg] = LHELD;
	sk = 0; si = 0; sm = 0
}

/* drop_lease(): indices back; an expired one remembered in :lost */
inline drop_lease(i, expd) {
	freem = freem | lmask[i];
	held = held - ln[i];
	if
	:: expd ->
		lstat[i * GMAX + lgen[i]] = LEXP;
#ifndef MUT_NO_LOST
		lostm[i] = lostm[i] | (1 << lgen[i])
#endif
	:: else -> lstat[i * GMAX + lgen[i]] = LREL
	fi;
	lgen[i] = 0; ln[i] = 0; lmask[i] = 0; lown[i] = 0; lx[i] = 0
}

inline remove_waiter(c) {
	sj = 0;
	do
	:: q[sj] == c -> break
	:: else -> sj++
	od;
	do
	:: sj + 1 < qlen -> q[sj] = q[sj + 1]; sj++
	:: else -> break
	od;
	qlen--;
	q[qlen] = 0;
	wn[c] = 0; wx[c] = 0;
	sj = 0
}

inline post(c, msg) {
	assert(mb[c] == MNONE);   /* one outcome per ticket */
	mb[c] = msg
}

/* FIFO: c is served only if no ticket before its own is queued */
inline fifo_check(c) {
	sx = 0;
	do
	:: sx < qlen -> assert(q[sx] == c || tk[q[sx]] > tk[c]); sx++
	:: else -> break
	od;
	sx = 0
}

/* pump(): hand permits to the head while it can be served in full */
inline pump() {
	do
	:: closed -> break
	:: else ->
		sj = 0;
#ifdef MUT_SKIP_HEAD
		do
		:: sj < qlen && AVAIL < wn[q[sj]] -> sj++
		:: else -> break
		od;
#endif
		if
		:: sj < qlen && AVAIL >= wn[q[sj]] ->
			sc = q[sj];
			if :: wn[sc] == 2 -> PROBE(8) :: else fi;
			fifo_check(sc);
			grant(sc, wn[sc]);
			remove_waiter(sc);
			post(sc, MG);
			mbi[sc] = ri; mbg[sc] = rg;
			gw[sc] = 1; ggi[sc] = ri; ggg[sc] = rg;
			ri = 0; rg = 0; sc = 0
		:: else -> break
		fi
	od;
	sj = 0
}

/* reap(): leases past their expiry, then waiters past theirs, then pump;
 * the first thing every function does (enter) */
inline reap() {
	sc = 0;
	do
	:: sc < N ->
		if :: lgen[sc] != 0 && lx[sc] -> drop_lease(sc, 1) :: else fi;
		sc++
	:: else -> break
	od;
	sc = 1;
	do
	:: sc <= NC ->
		if :: wn[sc] != 0 && wx[sc] -> remove_waiter(sc); post(sc, MX) :: else fi;
		sc++
	:: else -> break
	od;
	sc = 0;
	pump()
}

/* ---- the functions (each called inside one atomic step) --------------- */

/* f_acquire, mode 1: grant now when nobody queues, else a ticket */
inline f_acquire(me, n) {
	reap();
	if
	:: closed -> rep = R_SHUT
#ifdef MUT_BARGE
	:: !closed && AVAIL >= n ->
#else
	:: !closed && qlen == 0 && AVAIL >= n ->
#endif
		assert(qlen == 0);            /* FIFO: nobody is passed */
		grant(me, n); rep = R_OK
	:: else ->
		ticket++; tk[me] = ticket;
		mb[me] = MNONE;               /* DEL mb:T */
		q[qlen] = me; qlen++; wn[me] = n; wx[me] = 0;
		gw[me] = 0; glost[me] = 0;
		rep = R_QUEUED
	fi;
	check_inv()
}

inline f_wait_renew(me) {
#ifndef MUT_RENEW_NO_REAP
	reap();
#endif
	rep = (wn[me] != 0 -> R_QUEUED : R_DONE);
	check_inv()
}

/* f_cancel: one transition against the grant */
inline f_cancel(me) {
	reap();
	if
	:: wn[me] != 0 ->
		remove_waiter(me); mb[me] = MNONE; pump(); rep = R_LEFT
	:: else ->
		if
		:: mb[me] == MNONE || mb[me] == MX -> rep = R_EXP
		:: mb[me] == MS -> rep = R_SHUT
#ifdef MUT_CANCEL_DROP
		:: mb[me] == MG -> rep = R_EXP
#else
		:: mb[me] == MG -> rep = R_OK; ri = mbi[me]; rg = mbg[me]
#endif
		fi;
		mb[me] = MNONE; mbi[me] = 0; mbg[me] = 0
	fi;
	check_inv()
}

/* lease_state(i, g) into rep; sx: the ghost's view of (i, g) */
inline lease_state(i, g) {
	sx = lstat[i * GMAX + g];
#ifdef MUT_NO_GEN
	if :: lgen[i] != 0 -> rep = R_OK
#else
	if :: lgen[i] == g -> rep = R_OK
#endif
	:: else ->
		rep = ((lostm[i] >> g) & 1 -> R_EXP : R_ALREADY)
	fi
}

inline f_release(me, i, g) {
	reap();
	lease_state(i, g);
	/* exactly once: ok only for the lease held (and its owner), already
	 * for one released, expired for one reaped */
	assert(rep != R_OK || (sx == LHELD && lown[i] == me));
	assert(rep != R_EXP || sx == LEXP);
	assert(rep != R_ALREADY || sx == LREL);
	if
	:: rep == R_OK ->
		drop_lease(i, 0);
#ifndef MUT_NO_PUMP
		pump()
#endif
	:: else
	fi;
	sx = 0;
	check_inv()
}

inline f_renew(i, g) {
	reap();
	lease_state(i, g);
	assert(rep != R_OK || sx == LHELD);
	assert(rep != R_EXP || sx == LEXP);
	assert(rep != R_ALREADY || sx == LREL);
	sx = 0;
	check_inv()
}

/* ---- the client's side ----------------------------------------------------- */

/* the client takes lease (i, g): its keep-alive renews it from now on */
inline take(me, i, g) {
	chold[me] = 1; cidx[me] = i; cgen[me] = g
}

/* a reply may be lost after the server ran the call */
#define LOSE(x) \
	if \
	:: losts < MAXLOST -> losts++; x = R_LOST \
	:: true \
	fi

#define KILLPT \
	if \
	:: atomic { kills < MAXKILL -> kills++; dead[me] = 1; goto die } \
	:: true \
	fi

/* the end of a wait, checked: the waiter owns exactly the lease it was
 * granted, or nothing; then nothing of it was granted, or its G was lost */
inline wait_end(me) {
	cwait[me] = 0; due[me] = 0;
	if
	:: chold[me] -> assert(gw[me] && ggi[me] == cidx[me] && ggg[me] == cgen[me])
	:: else -> assert(!gw[me] || glost[me])
	fi
}

/* resolve(): shmsem_cancel, its reply (res) */
inline resolve(me) {
	f_cancel(me);
	res = rep;
	if
	:: res == R_OK -> LOSE(res); if :: res == R_LOST -> glost[me] = 1 :: else fi
	:: else -> LOSE(res)
	fi;
	if :: res == R_OK -> take(me, ri, rg) :: else fi;
	rep = 0; ri = 0; rg = 0
}

/* probes 6, 7: a deadline or cancel that found its grant, or left */
#define RESOLVED if :: res == R_OK -> PROBE(6) :: res == R_LEFT -> PROBE(7) :: else fi

proctype Client(byte me) {
	byte op, res;
	bool gaveup, ended;
	do
	:: op < OPSOF(me) ->
		KILLPT;
		atomic {
			f_acquire(me, WTOF(me));
			res = rep;
			LOSE(res);
			if
			:: res == R_OK -> take(me, ri, rg)
			:: res == R_QUEUED -> cwait[me] = 1
			:: else
			fi;
			rep = 0; ri = 0; rg = 0
		};
		if
		:: res == R_QUEUED ->
			/* wait_loop() */
			do
			:: atomic { due[me] -> resolve(me); RESOLVED; wait_end(me) }; break
			:: atomic { CANCELOF(me) && !due[me] -> resolve(me); RESOLVED; wait_end(me) }; break
			:: atomic { kills < MAXKILL -> kills++; dead[me] = 1; goto die }
			:: atomic { !due[me] ->
				/* block_once(): BLPOP pops the outcome, or times out */
				if
				:: mb[me] == MNONE -> res = R_NIL
				:: mb[me] == MG -> res = R_OK
				:: mb[me] == MS -> res = R_SHUT
				:: mb[me] == MX -> res = R_X
				fi;
				if
				:: res != R_NIL ->
					LOSE(res);
					if :: res == R_LOST && mb[me] == MG -> glost[me] = 1 :: else fi;
					if :: res == R_OK -> take(me, mbi[me], mbg[me]) :: else fi;
					mb[me] = MNONE; mbi[me] = 0; mbg[me] = 0
				:: else
				fi;
				if
				:: res == R_OK || res == R_SHUT || res == R_X ->
					if :: res == R_X -> PROBE(3) :: res == R_SHUT -> PROBE(4) :: else fi;
					wait_end(me)
				:: else
				fi
			   };
				if
				:: res == R_OK || res == R_SHUT || res == R_X -> break
				:: res == R_LOST -> skip  /* a broken BLPOP: again (MAXLOST < 3) */
				:: res == R_NIL ->
					/* keep_place(): wait_renew */
					atomic {
						f_wait_renew(me);
						res = rep; rep = 0;
						LOSE(res);
						if
						:: res == R_LOST && !TIMEDOF(me) ->
							/* -ECOMM: gives up, its grant (if any) abandoned */
							glost[me] = gw[me]; wait_end(me); ended = 1
#ifndef BUG_R1
						/* "done": the outcome is in the mailbox or was
						 * lost with a BLPOP's reply; cancel takes it */
						:: res == R_DONE ->
							resolve(me);
							if :: res == R_OK -> PROBE(1) :: res == R_EXP -> PROBE(2) :: else fi;
							wait_end(me); ended = 1
#endif
						:: else
						fi
					};
					if
					:: ended -> ended = 0; break
					:: else
					fi;
					res = R_QUEUED
				fi
			od
		:: else
		fi;
		if
		:: res == R_LOST -> gaveup = 1
		:: else
		fi;
		res = 0;
		if
		:: chold[me] ->
			KILLPT;
#ifdef RENEW
			if
			:: atomic { f_renew(cidx[me], cgen[me]); rep = 0 }
			:: skip
			fi;
			KILLPT;
#endif
			atomic {
				f_release(me, cidx[me], cgen[me]);
				if :: rep == R_EXP -> PROBE(5) :: else fi;
				res = rep; rep = 0;
				LOSE(res);
				chold[me] = 0
			};
#ifdef DOUBLE_RELEASE
			KILLPT;
			atomic {
				f_release(me, cidx[me], cgen[me]);
				assert(rep != R_OK);
				if :: rep == R_ALREADY -> PROBE(10) :: else fi;
				rep = 0
			};
#endif
			cidx[me] = NONE; cgen[me] = 0
		:: else
		fi;
		res = 0;
		op++;
		/* -ECOMM from acquire, or from a wait without deadline: a ticket
		 * of this client may still be queued; the client stops rather
		 * than queue a second one (MODEL.md) */
		if :: gaveup -> break :: else fi
	:: else -> break
	od;
	finished++;
	goto end;
die:
	finished++;
end:
	skip
}

/* The clock: expiries of what nobody keeps alive, and deadlines. */
#define EXPIRE_LEASE(i) \
	:: atomic { i < N && lgen[i] != 0 && !lx[i] && (!KEPT(i) || pauses < MAXPAUSE) -> \
		if :: KEPT(i) -> pauses++ :: else fi; lx[i] = 1 }
#define EXPIRE_TICKET(c) \
	:: atomic { wn[c] != 0 && !wx[c] && (!WKEPT(c) || lapses < MAXLAPSE) -> \
		if :: WKEPT(c) -> lapses++ :: else fi; wx[c] = 1 }
#define DEADLINE(c) \
	:: atomic { TIMEDOF(c) && cwait[c] && !dead[c] && !due[c] -> due[c] = 1 }

proctype Clock() {
end:
	do
	EXPIRE_LEASE(0)
	EXPIRE_LEASE(1)
	EXPIRE_TICKET(1)
	EXPIRE_TICKET(2)
	EXPIRE_TICKET(3)
	DEADLINE(1)
	DEADLINE(2)
	DEADLINE(3)
	od
}

/* f_shutdown: every queued waiter hears S; acquires are refused */
inline f_shutdown() {
	reap();
	closed = 1;
	do
	:: qlen > 0 -> sc = q[0]; remove_waiter(sc); post(sc, MS); sc = 0
	:: else -> break
	od;
	check_inv()
}

/* f_set_permits */
inline f_set_permits(p) {
	reap(); permits = p; pump(); check_inv()
}

/* After every client ended: their leases and tickets expire (nobody keeps
 * them alive), and one function (recover) reaps them: every permit is back. */
inline final() {
	sc = 0;
	do
	:: sc < N ->
		assert(lgen[sc] == 0 || !KEPT(sc));
		if :: lgen[sc] != 0 -> PROBE(9) :: else fi;
		lx[sc] = 1; sc++
	:: else -> break
	od;
	sc = 1;
	do
	:: sc <= NC -> assert(!WKEPT(sc)); wx[sc] = 1; sc++
	:: else -> break
	od;
	sc = 0;
	reap();
	check_inv();
	assert(held == 0 && qlen == 0 && freem == (1 << N) - 1)
}

/* init also plays the operator: a shutdown (SHUTDOWN), a resize to RESIZE
 * and back (RESIZE), each at any moment of the clients' runs (fewer
 * processes: an ltl run's fairness counts them). */
init {
	atomic {
		freem = (1 << N) - 1;
		cidx[1] = NONE; cidx[2] = NONE; cidx[3] = NONE;
		run Clock();
		run Client(1); run Client(2); run Client(3)
	};
#ifdef SHUTDOWN
	atomic { f_shutdown() };
#endif
#ifdef RESIZE
	atomic { f_set_permits(RESIZE) };
	atomic { f_set_permits(N) };
#endif
	finished == NC;
	atomic { final() }
}

#ifdef LTL_TERMINATES
/* Under weak fairness (the clock included): every client's wait ends. */
ltl terminates { <> (finished == NC) }
#endif
